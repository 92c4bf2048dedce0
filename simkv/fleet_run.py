"""Library entry point of a fleet run (a config with ``fleet:``): config → workload → replicas
behind a router in one event loop → combined frames → fleet and per-replica summaries.

:func:`simkv.runner.simulate` hands a fleet config here, so a fleet run is a normal run for
the CLI and the sweep executors (same :class:`~simkv.runner.RunOutput`, plus its
``replicas`` table; :func:`~simkv.runner.write_run` writes ``replicas.json``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from simkv.config.sim import SimConfig
from simkv.engine.capacity import KVSizing
from simkv.engine.engine import Environment
from simkv.engine.fleet import Fleet, ProgressFn
from simkv.engine.fleet_view import FleetView
from simkv.engine.routers import build_router
from simkv.engine.sessions import Sessions
from simkv.errors import InputError, all_of
from simkv.metrics.fleet import combine, fleet_summary
from simkv.metrics.summary import DEFAULT_PERCENTILES
from simkv.runner import (
    RunOutput,
    _checked_inputs,
    assemble_engine,
    check_kv,
    check_schedulable,
    usage_capacity,
)
from simkv.workload.request import Workload

ROUTER_STREAM = 1
"""The router's generator is ``default_rng([seed, ROUTER_STREAM])``: a stream of its own, so
routing draws never shift the workload's (``default_rng(seed)``)."""


def _in_group(cfg: SimConfig, k: int, field: str | None) -> str | None:
    """The key an error of group ``k`` is about: the group's own section when it gives one,
    else the top-level key it inherits."""
    section = field.partition(".")[0] if field else ""
    group = cfg.fleet.replicas[k] if cfg.fleet is not None else None
    if field and group is not None and getattr(group, section, None) is not None:
        return f"fleet.replicas.{k}.{field}"
    return field


def group_sizings(cfg: SimConfig, workload: Workload | None = None) -> list[KVSizing]:
    """The KV pool of each replica group (of the one engine without ``fleet:``), checked as
    one engine's is, and, given the ``workload``, each group's schedulability; the errors of
    all groups together, each naming its group (in a fleet)."""
    sizings, errors = [], []
    groups = cfg.group_configs()
    for k, group in enumerate(groups):
        try:
            sizings.append(check_kv(group))
            if workload is not None:
                check_schedulable(group, workload)
        except InputError as err:
            if cfg.fleet is None:
                raise
            errors.append(
                InputError(f"replica group {k}: {err.message}", field=_in_group(cfg, k, err.field))
            )
    if errors:
        raise all_of(errors)
    return sizings


def build_fleet(
    cfg: SimConfig,
    base_dir: Path,
    *,
    check_invariants: bool = False,
    workload: Workload | None = None,
    fast_forward: bool = True,
    progress: ProgressFn | None = None,
) -> tuple[Fleet, list[KVSizing], list[SimConfig]]:
    """Assemble a fleet run: one engine per replica (its group's config) in one environment,
    the router, its view; returns the fleet, each replica's KV pool and config."""
    if cfg.fleet is None:
        raise ValueError("build_fleet needs a config with fleet:")
    groups = cfg.group_configs()
    workload, _ = _checked_inputs(groups[0], base_dir, workload)
    group_sizing = group_sizings(cfg, workload)
    env, sessions = Environment(), Sessions(workload)
    replicas, sizings, configs = [], [], []
    for group, sizing, spec in zip(groups, group_sizing, cfg.fleet.replicas, strict=True):
        for _ in range(spec.count):
            replicas.append(assemble_engine(
                group, base_dir, workload, sizing, check_invariants=check_invariants,
                fast_forward=fast_forward, pull_arrivals=False, env=env, sessions=sessions,
            ))  # fmt: skip
            sizings.append(sizing)
            configs.append(group)
    router = build_router(
        cfg.fleet.router, np.random.default_rng([cfg.seed, ROUTER_STREAM]), workload
    )
    view = FleetView(replicas, workload, cfg.fleet.staleness_ms / 1e3)
    return Fleet(replicas, router, view, sessions, progress=progress), sizings, configs


def _labels(cfg: SimConfig, configs: list[SimConfig]) -> list[dict[str, object]]:
    """Each replica's group name, GPU and TP, for the per-replica table."""
    if cfg.fleet is None:
        return []
    names = [
        group.name or f"g{k}"
        for k, group in enumerate(cfg.fleet.replicas)
        for _ in range(group.count)
    ]
    return [
        {"group": name, "gpu": one.gpu.name, "tensor_parallel": one.parallel.tensor_parallel}
        for name, one in zip(names, configs, strict=True)
    ]


def simulate_fleet(
    cfg: SimConfig,
    base_dir: Path,
    *,
    progress: ProgressFn | None = None,
    check_invariants: bool = False,
    fast_forward: bool = True,
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES,
) -> RunOutput:
    """Run a fleet config (as :func:`simkv.runner.simulate` one engine); deterministic for a
    given config (routing draws included)."""
    started = time.perf_counter()
    fleet, sizings, configs = build_fleet(
        cfg, base_dir, check_invariants=check_invariants, fast_forward=fast_forward,
        progress=progress,
    )  # fmt: skip
    fleet.run()
    frames = [engine.recorder.frames() for engine in fleet.replicas]
    combined = combine(frames, np.frombuffer(fleet.replica_of, dtype=np.int64))
    capacities = [usage_capacity(c, s) for s, c in zip(sizings, configs, strict=True)]
    summary, replicas = fleet_summary(
        frames, combined, capacities, _labels(cfg, configs), cfg.slo, percentiles
    )
    return RunOutput(
        cfg, sizings[0], combined, summary, time.perf_counter() - started, replicas=replicas
    )
