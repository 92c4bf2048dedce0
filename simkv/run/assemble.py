"""Build a run from its checked inputs: one engine per replica (its group's cost model,
recorder, scheduler over its KV memory, limits) and, for a fleet, the router and the view it
reads, all in one SimPy environment.

The run's random streams are named here and nowhere else (:class:`Stream`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

import numpy as np

from simkv.config.sim import SimConfig
from simkv.engine.costs import build_cost_model
from simkv.engine.engine import Engine, Environment, ProgressFn
from simkv.engine.fleet import Fleet
from simkv.engine.fleet_view import FleetView
from simkv.engine.intake import EngineLimits
from simkv.engine.registry import build_scheduler
from simkv.engine.routers import build_router
from simkv.engine.sessions import Sessions
from simkv.metrics.recorder import Recorder
from simkv.run.inputs import GroupInputs, RunInputs


class Stream(IntEnum):
    """The run's random streams besides the workload's (``default_rng(seed)``, drawn while the
    workload is built): stream ``s`` is ``default_rng([seed, s])``, so no stream's draws shift
    another's, and adding draws to one changes no other."""

    BEAMS = 1  # vllm_v0's beam parents (every replica of a fleet has its own generator)
    ROUTER = 2  # a fleet router's draws (random, power-of-two choices, weighted)


def stream(cfg: SimConfig, which: Stream) -> np.random.Generator:
    """A new generator of the run's stream ``which``."""
    return np.random.default_rng([cfg.seed, int(which)])


@dataclass(frozen=True)
class Assembly:
    """A run ready to simulate: its replicas in order (a group's ``count`` replicas together),
    the group each replica runs, and the fleet that drives them (None for one engine, which
    drives itself)."""

    inputs: RunInputs
    replicas: list[Engine]
    group_of: list[GroupInputs]
    fleet: Fleet | None

    @property
    def engine(self) -> Engine:
        """The engine of a run without ``fleet:``."""
        if self.fleet is not None:
            raise ValueError("a fleet run has several engines: use .replicas")
        return self.replicas[0]


def _engine(group: GroupInputs, inputs: RunInputs, base_dir: Path, **engine_args: object) -> Engine:
    """One engine of ``group``; ``engine_args`` as :class:`Engine` takes them."""
    cfg, sizing = group.config, group.sizing
    cost = build_cost_model(
        cfg.cost_model, cfg.model, cfg.gpu, tensor_parallel=cfg.parallel.tensor_parallel,
        block_size=sizing.block_size, base_dir=base_dir,
    )  # fmt: skip
    recorder = Recorder()
    scheduler = build_scheduler(cfg, sizing, recorder, stream(cfg, Stream.BEAMS))
    caching = (cfg.kv_cache.prefix_caching or "none") != "none"
    limits = EngineLimits(cfg.model.max_model_len, sizing.block_size, content_keys=caching)
    return Engine(inputs.workload, scheduler, cost, recorder, limits, **engine_args)  # type: ignore[arg-type]


def assemble(
    cfg: SimConfig,
    inputs: RunInputs,
    base_dir: Path,
    *,
    progress: ProgressFn | None = None,
    check_invariants: bool = False,
    fast_forward: bool = True,
    pull_arrivals: bool = True,
) -> Assembly:
    """The engines of a checked run (:func:`simkv.run.inputs.check_inputs`), and the fleet over
    them when ``cfg`` has ``fleet:``. ``fast_forward`` and ``pull_arrivals`` as
    :class:`~simkv.engine.engine.Engine` takes them (neither changes a result; tests compare)."""
    args = {"check_invariants": check_invariants, "fast_forward": fast_forward}
    if cfg.fleet is None:
        group = inputs.groups[0]
        engine = _engine(group, inputs, base_dir, progress=progress, pull_arrivals=pull_arrivals,
                         **args)  # fmt: skip
        return Assembly(inputs, [engine], [group], None)
    env, sessions = Environment(), Sessions(inputs.workload)
    group_of = [group for group in inputs.groups for _ in range(group.count)]
    replicas = [
        _engine(group, inputs, base_dir, pull_arrivals=False, env=env, sessions=sessions, **args)
        for group in group_of
    ]
    router = build_router(cfg.fleet.router, stream(cfg, Stream.ROUTER), inputs.workload)
    view = FleetView(replicas, inputs.workload, cfg.fleet.staleness_ms / 1e3)
    fleet = Fleet(replicas, router, view, sessions, progress=progress)
    return Assembly(inputs, replicas, group_of, fleet)
