"""Build a run from its checked inputs: one engine per replica (its group's cost model,
recorder, scheduler over its KV memory, limits) and, for a fleet, the router and the view it
reads, all in one SimPy environment.

The run's random streams are named here and nowhere else (:class:`Stream`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum
from pathlib import Path

import numpy as np

from simkv.config.sim import SimConfig
from simkv.engine.costs import build_cost_model
from simkv.engine.disagg import Disaggregation
from simkv.engine.engine import Engine, Environment, ProgressFn
from simkv.engine.fleet import Fleet
from simkv.engine.fleet_view import FleetView
from simkv.engine.handoff import Handoff
from simkv.engine.intake import EngineLimits
from simkv.engine.registry import build_scheduler
from simkv.engine.routers import build_router
from simkv.engine.sessions import Sessions
from simkv.engine.tier_net import TierNet
from simkv.metrics.recorder import Recorder
from simkv.run.inputs import GroupInputs, RunInputs
from simkv.run.tiers import attach_tiers
from simkv.workload.request import Workload


class Stream(IntEnum):
    """The run's random streams besides the workload's (``default_rng(seed)``, drawn while the
    workload is built): stream ``s`` is ``default_rng([seed, s])``, so no stream's draws shift
    another's, and adding draws to one changes no other."""

    BEAMS = 1  # vllm_v0's beam parents (every replica of a fleet has its own generator)
    ROUTER = 2  # a fleet router's draws (random, power-of-two choices, weighted)
    PREFILL_ROUTER = 3  # the prefill router's of a disaggregated fleet


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
    tiers: TierNet | None = None  # the KV offload tiers (simkv.run.tiers)

    @property
    def engine(self) -> Engine:
        """The engine of a run without ``fleet:``."""
        if self.fleet is not None:
            raise ValueError("a fleet run has several engines: use .replicas")
        return self.replicas[0]


def _engine(
    group: GroupInputs, workload: Workload, base_dir: Path, **engine_args: object
) -> Engine:
    """One engine of ``group`` serving ``workload``; ``engine_args`` as :class:`Engine`
    takes them."""
    cfg, sizing = group.config, group.sizing
    cost = build_cost_model(
        cfg.cost_model, cfg.model, cfg.gpu, tensor_parallel=cfg.parallel.tensor_parallel,
        block_size=sizing.block_size, base_dir=base_dir,
    )  # fmt: skip
    recorder = Recorder()
    scheduler = build_scheduler(cfg, sizing, recorder, stream(cfg, Stream.BEAMS))
    caching = (cfg.kv_cache.prefix_caching or "none") != "none"
    limits = EngineLimits(cfg.model.max_model_len, sizing.block_size, content_keys=caching)
    return Engine(workload, scheduler, cost, recorder, limits, **engine_args)  # type: ignore[arg-type]


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
        # (a tier load may wake an idle engine: arrivals through the arrival process then)
        pull = pull_arrivals and not cfg.kv_cache.tiers
        engine = _engine(group, inputs.workload, base_dir, progress=progress,
                         pull_arrivals=pull, **args)  # fmt: skip
        tiers = attach_tiers(cfg, engine.env, [engine], [group], inputs.workload)
        return Assembly(inputs, [engine], [group], None, tiers)
    env, workload = Environment(), inputs.workload
    sessions = Sessions(workload)
    specs = [spec for spec in cfg.fleet.replicas for _ in range(spec.count)]
    group_of = [group for group in inputs.groups for _ in range(group.count)]
    split = cfg.fleet.disaggregation is not None
    legs = prefill_legs(workload) if split else workload  # what a prefill replica runs
    unlinked = Sessions(legs) if split else sessions  # a prefill leg releases no next turn
    replicas = [
        _engine(group, legs if spec.role == "prefill" else workload, base_dir,
                pull_arrivals=False, env=env,
                sessions=unlinked if spec.role == "prefill" else sessions, **args)
        for group, spec in zip(group_of, specs, strict=True)
    ]  # fmt: skip
    staleness_s = cfg.fleet.staleness_ms / 1e3
    serving = [
        engine for engine, spec in zip(replicas, specs, strict=True) if spec.role != "prefill"
    ]
    router = build_router(cfg.fleet.router, stream(cfg, Stream.ROUTER), workload)
    view = FleetView(serving, workload, staleness_s)
    disagg = None
    if split:
        roles = [s.role for s in specs]
        disagg = _disaggregation(cfg, env, replicas, group_of, roles, legs, workload)
    fleet = Fleet(replicas, router, view, sessions, progress=progress, disagg=disagg)
    tiers = attach_tiers(cfg, env, replicas, group_of, workload)
    return Assembly(inputs, replicas, group_of, fleet, tiers)


def prefill_legs(workload: Workload) -> Workload:
    """The workload a prefill replica runs: every request with one output token (the
    proxy's ``max_tokens=1``) and no sessions (its requests follow none)."""
    ones = np.ones(len(workload), dtype=np.int64)
    return replace(workload, output_tokens=ones, session_id=None, turn=None, think_s=None)


def _disaggregation(
    cfg: SimConfig, env: Environment, replicas: list[Engine], group_of: list[GroupInputs],
    roles: list[str], legs: Workload, workload: Workload,
) -> Disaggregation:  # fmt: skip
    """The prefill/decode side of a fleet, and each prefill or decode replica's hand-offs.
    The prefill router sees the ``legs`` with the ``workload``'s sessions (so
    ``session_affinity`` keeps a session's prefills on one replica)."""
    disagg_cfg = cfg.fleet.disaggregation  # type: ignore[union-attr]
    if disagg_cfg is None:
        raise ValueError("a fleet without disaggregation has no prefill/decode side")
    prefill = [engine for engine, role in zip(replicas, roles, strict=True) if role == "prefill"]
    model = group_of[roles.index("prefill")].config.model
    disagg = Disaggregation(
        disagg_cfg, env, replicas, roles,
        build_router(
            disagg_cfg.prefill_router, stream(cfg, Stream.PREFILL_ROUTER),
            replace(legs, session_id=workload.session_id, turn=workload.turn,
                    think_s=workload.think_s),
        ),
        FleetView(prefill, legs, cfg.fleet.staleness_ms / 1e3),  # type: ignore[union-attr]
        legs, kv_bytes_per_token=model.kv_bytes_per_token, max_model_len=model.max_model_len,
        gpus=[group.config.parallel.tensor_parallel for group in group_of],
        num_layers=model.num_layers,
    )  # fmt: skip
    for r, (engine, role) in enumerate(zip(replicas, roles, strict=True)):
        if role != "mixed":
            sched = engine.scheduler
            kv = sched.kv  # type: ignore[attr-defined]
            handoff = Handoff(
                kv, sched.waiting, disagg, r,  # type: ignore[attr-defined]
                prefills=role == "prefill", returns=disagg_cfg.return_kv,
            )  # fmt: skip
            sched.handoff = disagg.handoffs[r] = handoff
            if role == "prefill":
                engine.step_hooks = disagg.layers  # (None: store-and-forward)
    return disagg
