"""Library entry point of one run: config → workload → engine → frames → summary → files.

The CLI and the sweep executors call :func:`simulate` and :func:`write_run`; nothing else.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simkv.config.limits import MAX_BLOCKS
from simkv.config.policy import OrcaConfig
from simkv.config.sim import GIB, SimConfig, dump_resolved
from simkv.engine.capacity import (
    InsufficientMemory,
    KVSizing,
    blocks_from_bytes,
    kv_capacity_blocks,
)
from simkv.engine.costs import build_cost_model
from simkv.engine.engine import Engine
from simkv.engine.intake import EngineLimits
from simkv.engine.registry import build_scheduler
from simkv.errors import InputError, all_of
from simkv.metrics.files import FrameFormat, write_frames
from simkv.metrics.recorder import Recorder, RunFrames
from simkv.metrics.summary import DEFAULT_PERCENTILES, summarize
from simkv.workload.build import build_workload
from simkv.workload.request import Workload


@dataclass(frozen=True)
class RunOutput:
    """Everything one run produced; ``requests``, ``steps`` and ``itl`` are its frames."""

    config: SimConfig
    sizing: KVSizing
    frames: RunFrames
    summary: dict[str, float | None]
    wall_s: float
    replicas: pd.DataFrame | None = None  # a fleet's per-replica table (simkv.metrics.fleet)

    @property
    def requests(self) -> pd.DataFrame:
        """One row per request (:mod:`simkv.metrics.recorder`)."""
        return self.frames.requests

    @property
    def steps(self) -> pd.DataFrame:
        """One row per engine step."""
        return self.frames.steps

    @property
    def itl(self) -> pd.DataFrame:
        """Inter-token latencies as weighted samples ``(itl_s, count)``."""
        return self.frames.itl


def kv_sizing(cfg: SimConfig) -> KVSizing:
    """Resolve the KV pool: given blocks, given GiB, or derived from GPU memory."""
    kv, tp, model = cfg.kv_cache, cfg.parallel.tensor_parallel, cfg.model
    try:
        if kv.num_blocks is not None:
            blocks = kv.num_blocks
        elif kv.capacity_gib is not None:
            blocks = blocks_from_bytes(
                int(kv.capacity_gib * GIB), model, tensor_parallel=tp, block_size=kv.block_size
            )
        else:
            blocks = kv_capacity_blocks(
                model, cfg.gpu, tensor_parallel=tp, block_size=kv.block_size,
                gpu_memory_utilization=kv.gpu_memory_utilization,
                activation_reserve_bytes=int(kv.activation_reserve_gib * GIB),
            )  # fmt: skip
    except InsufficientMemory as err:
        raise InputError(str(err), field="kv_cache") from None
    if blocks > MAX_BLOCKS:
        raise InputError(
            f"{blocks:,} KV blocks per GPU, more than the {MAX_BLOCKS:,} the simulator holds; "
            "use a larger block_size or less memory",
            field="kv_cache",
        )
    block_bytes = kv.block_size * model.kv_bytes_per_token // tp
    swap_blocks = int(kv.swap_space_gib * GIB) // block_bytes
    return KVSizing(blocks, kv.block_size, block_bytes, swap_blocks)


def _check_fits_max_len(cfg: SimConfig, sizing: KVSizing) -> None:
    """As vLLM at start-up: one request of ``max_model_len`` tokens must fit in the KV cache."""
    paged = cfg.scheduler.traits.memory == "paged"
    if paged and sizing.token_slots < cfg.model.max_model_len:
        raise InputError(
            f"the KV cache holds {sizing.token_slots} tokens ({sizing.num_blocks} blocks of "
            f"{sizing.block_size}), less than max_model_len {cfg.model.max_model_len}; give it "
            "more memory or lower model.max_model_len",
            field="kv_cache",
        )


def _prompt_limit(cfg: SimConfig) -> tuple[int, str] | None:
    """(the longest prompt the scheduler can ever admit, the key that sets it), or None when
    any prompt below ``max_model_len`` can be admitted (vllm_v0 rejects longer ones; vllm_v1
    has a budget of at least ``max_model_len`` with chunked prefill off, as vLLM 0.11 requires:
    ``simkv.config.policy.v1_budget_problems``)."""
    sched = cfg.scheduler
    if isinstance(sched, OrcaConfig) and sched.max_num_batched_tokens is not None:
        return sched.max_num_batched_tokens, "scheduler.max_num_batched_tokens"
    return None


def check_schedulable(cfg: SimConfig, workload: Workload) -> None:
    """A config that can only stall is an input error found at start-up: a prompt longer than
    the scheduler can ever admit whole (no chunking) that no prefix-cache hit can shorten (the
    workload has no shared content or caching is off) would wait forever, and everything
    behind it. (Stalls that depend on the run, e.g. a recompute grown past the budget, are
    reported by the engine.)"""
    limit = _prompt_limit(cfg)
    caching = (cfg.kv_cache.prefix_caching or "none") != "none"
    if limit is None or (caching and workload.content is not None):
        return
    tokens, key = limit
    prompts = workload.prompt_tokens
    admissible = prompts[prompts < cfg.model.max_model_len]  # longer ones are rejected
    if admissible.size and int(admissible.max()) > tokens:
        longest = int(admissible.max())
        raise InputError(
            f"{tokens} tokens, but a prompt of {longest} tokens can never be scheduled whole "
            f"and the run would stall; raise {key.split('.')[-1]} to at least {longest}",
            field=key,
        )


def usable_blocks(cfg: SimConfig, sizing: KVSizing) -> int:
    """The blocks requests can hold: the pool less vLLM V1's null block where the scheduler
    has one (``SchedulerTraits.null_block``)."""
    return sizing.num_blocks - cfg.scheduler.traits.null_block


def usage_capacity(cfg: SimConfig, sizing: KVSizing) -> int:
    """What KV usage is a share of: the usable blocks of a paged pool, the token slots of
    contiguous memory (accounted in slots)."""
    if cfg.scheduler.traits.memory == "contiguous":
        return sizing.token_slots
    return usable_blocks(cfg, sizing)


def check_fits_longest(cfg: SimConfig, workload: Workload, sizing: KVSizing) -> None:
    """A request whose KV (prompt plus output, as truncated to ``max_model_len``, less the
    last sampled token) needs more blocks than the usable pool could never finish: it would
    preempt itself forever. vLLM's start-up check counts the null block as room
    (``kv_cache_utils.check_enough_kv_cache_memory``), so a pool of exactly ``max_model_len``
    tokens passes it and a longest request then stalls; simkv refuses such a config."""
    if cfg.scheduler.traits.memory != "paged":
        return
    max_len, bs = cfg.model.max_model_len, sizing.block_size
    prompts = workload.prompt_tokens.astype(np.int64)
    total = np.minimum(prompts + workload.output_tokens, max_len)[prompts < max_len]
    longest = int(total.max()) if total.size else 1
    need = max(1, -(-(longest - 1) // bs))
    usable = usable_blocks(cfg, sizing)
    if need > usable:
        null = cfg.scheduler.traits.null_block
        held = " (one is vLLM V1's null block)" if null else ""
        why = (
            f"a request of {longest} tokens needs {need} and could never finish"
            if total.size
            else "no request could run"
        )
        raise InputError(
            f"{sizing.num_blocks} blocks{held} leave {usable} for requests, but {why} (the "
            f"run would stall); give the KV cache at least {need + null} blocks or lower "
            "model.max_model_len",
            field="kv_cache",
        )


def check_kv(cfg: SimConfig) -> KVSizing:
    """The KV pool of ``cfg``, checked as vLLM checks it at start-up (it holds one request of
    ``max_model_len`` tokens under the paged schedulers)."""
    sizing = kv_sizing(cfg)
    _check_fits_max_len(cfg, sizing)
    return sizing


def _checked_inputs(
    cfg: SimConfig, base_dir: Path, workload: Workload | None
) -> tuple[Workload, KVSizing]:
    """The workload (built unless given) and KV pool of a run; the errors of the workload's
    files, the KV pool and schedulability are raised together, one a line."""
    errors: list[InputError] = []
    sizing = None
    if workload is None:
        try:
            workload = build_workload(cfg.workload, np.random.default_rng(cfg.seed), base_dir)
        except InputError as err:
            errors.append(err)
    try:
        sizing = check_kv(cfg)
    except InputError as err:
        errors.append(err)
    if workload is not None:
        try:
            check_schedulable(cfg, workload)
            if sizing is not None:
                check_fits_longest(cfg, workload, sizing)
        except InputError as err:
            errors.append(err)
    if errors or workload is None or sizing is None:
        raise all_of(errors)
    return workload, sizing


ProgressFn = Callable[[int, int], None]


def build_engine(
    cfg: SimConfig,
    base_dir: Path,
    *,
    progress: ProgressFn | None = None,
    check_invariants: bool = False,
    workload: Workload | None = None,
    fast_forward: bool = True,
    pull_arrivals: bool = True,
) -> tuple[Engine, KVSizing]:
    """Assemble one run's engine (workload, KV memory, scheduler, cost model, recorder).

    ``workload`` replaces the one the config describes (for programmatic use and tests);
    ``fast_forward`` and ``pull_arrivals`` as :class:`~simkv.engine.engine.Engine` takes them
    (both change nothing in the results; tests compare).
    """
    workload, sizing = _checked_inputs(cfg, base_dir, workload)
    engine = assemble_engine(
        cfg, base_dir, workload, sizing, check_invariants=check_invariants,
        progress=progress, fast_forward=fast_forward, pull_arrivals=pull_arrivals,
    )  # fmt: skip
    return engine, sizing


def assemble_engine(
    cfg: SimConfig, base_dir: Path, workload: Workload, sizing: KVSizing, **engine_args: Any
) -> Engine:
    """One engine over a checked workload and KV pool: its cost model, recorder, scheduler
    (over its KV memory) and limits; ``engine_args`` as :class:`Engine` takes them (a fleet's
    replicas share an ``env``)."""
    cost = build_cost_model(
        cfg.cost_model, cfg.model, cfg.gpu, tensor_parallel=cfg.parallel.tensor_parallel,
        block_size=sizing.block_size, base_dir=base_dir,
    )  # fmt: skip
    recorder = Recorder()
    scheduler = build_scheduler(cfg, sizing, recorder)
    caching = (cfg.kv_cache.prefix_caching or "none") != "none"
    limits = EngineLimits(cfg.model.max_model_len, sizing.block_size, content_keys=caching)
    return Engine(workload, scheduler, cost, recorder, limits, **engine_args)


def simulate(
    cfg: SimConfig,
    base_dir: Path,
    *,
    progress: ProgressFn | None = None,
    check_invariants: bool = False,
    fast_forward: bool = True,
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES,
) -> RunOutput:
    """Run one simulation; deterministic for a given config (its ``seed`` included).

    ``fast_forward`` advances steadily decoding requests lazily (simkv.engine.lazy), same results;
    ``percentiles`` (0–100) are added to the summary's (:func:`~simkv.metrics.summary.summarize`).
    """
    if cfg.fleet is not None:  # (imported here: simkv.fleet_run builds on this module)
        from simkv.fleet_run import simulate_fleet

        return simulate_fleet(
            cfg, base_dir, progress=progress, check_invariants=check_invariants,
            fast_forward=fast_forward, percentiles=percentiles,
        )  # fmt: skip
    started = time.perf_counter()
    engine, sizing = build_engine(
        cfg, base_dir, progress=progress, check_invariants=check_invariants,
        fast_forward=fast_forward,
    )  # fmt: skip
    engine.run()
    frames = engine.recorder.frames()
    summary = summarize(frames, cfg.slo, usage_capacity(cfg, sizing), percentiles)
    return RunOutput(cfg, sizing, frames, summary, time.perf_counter() - started)


def write_run(out: RunOutput, out_dir: Path, fmt: FrameFormat = FrameFormat.parquet) -> list[Path]:
    """Write the run's files into ``out_dir`` (frames as ``fmt``); returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = write_frames(out.frames, out_dir, fmt)
    for stale in FrameFormat:  # a run folder holds one format: a rerun's old frames go
        if stale is not fmt:
            for path in frames:
                path.with_suffix(f".{stale.value}").unlink(missing_ok=True)
    paths = {
        "summary": out_dir / "summary.json",
        "config": out_dir / "config.resolved.yaml",
    }
    sizing = {
        "kv_num_blocks": out.sizing.num_blocks,
        "kv_block_bytes": out.sizing.block_bytes,
        "kv_swap_blocks": out.sizing.swap_blocks,
        "kv_token_slots": out.sizing.token_slots,
    }
    paths["summary"].write_text(json.dumps({**out.summary, **sizing}, indent=2) + "\n")
    if out.replicas is not None:
        paths["replicas"] = out_dir / "replicas.json"
        paths["replicas"].write_text(out.replicas.to_json(orient="records", indent=2) + "\n")
    else:
        (out_dir / "replicas.json").unlink(missing_ok=True)  # a rerun without a fleet
    paths["config"].write_text(dump_resolved(out.config))
    return [*frames, *paths.values()]
