"""One run, end to end: checked inputs → assembled engines → simulated → frames and summary;
and the files a run leaves in its folder.

The CLI, the Python API, sweeps, capacity searches and calibration all run through
:func:`simulate`; a config with ``fleet:`` takes the same path with one engine per replica.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from simkv.config.sim import SimConfig, dump_resolved
from simkv.engine.capacity import KVSizing
from simkv.engine.engine import ProgressFn
from simkv.metrics.disagg import disagg_summary, with_paths
from simkv.metrics.files import FrameFormat, write_frames
from simkv.metrics.fleet import combine, fleet_summary
from simkv.metrics.latency import request_latencies
from simkv.metrics.recorder import RunFrames
from simkv.metrics.summary import DEFAULT_PERCENTILES, summarize
from simkv.metrics.tiers import tier_summary, with_tiers
from simkv.metrics.utilisation import ReplicaCompute, utilisation, utilisation_summary
from simkv.outputs import make_folder, write_file
from simkv.run.assemble import Assembly, assemble
from simkv.run.inputs import check_inputs
from simkv.run.sizing import usage_capacity
from simkv.workload.request import Workload


@dataclass(frozen=True)
class RunOutput:
    """Everything one run produced; ``requests``, ``steps``, ``itl`` and ``preemptions`` are
    its frames."""

    config: SimConfig
    sizing: KVSizing  # the KV pool of the (first replica group's) engine
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

    @property
    def preemptions(self) -> pd.DataFrame | None:
        """One row per preemption (:mod:`simkv.metrics.recorder`): request, when, kind, when
        it was scheduled again and sampled its next token."""
        return self.frames.preemptions

    @property
    def latencies(self) -> pd.DataFrame:
        """``ttft_ms``, ``tpot_ms`` and ``e2el_ms`` of each request (the index of
        :attr:`requests`; NaN where undefined), as the summary computes them
        (:func:`simkv.metrics.latency.request_latencies`)."""
        return request_latencies(self.frames.requests)


def build(
    cfg: SimConfig,
    base_dir: Path,
    *,
    workload: Workload | None = None,
    progress: ProgressFn | None = None,
    check_invariants: bool = False,
    fast_forward: bool = True,
    pull_arrivals: bool = True,
) -> Assembly:
    """A run of ``cfg`` ready to simulate: its inputs checked (:func:`check_inputs`; a given
    ``workload`` replaces the one the config describes) and assembled (:func:`assemble`)."""
    inputs = check_inputs(cfg, base_dir, workload)
    return assemble(
        cfg, inputs, base_dir, progress=progress, check_invariants=check_invariants,
        fast_forward=fast_forward, pull_arrivals=pull_arrivals,
    )  # fmt: skip


def _labels(run: Assembly) -> list[dict[str, object]]:
    """Each replica's group name, GPU and TP, for the per-replica table."""
    return [
        {"group": group.name, "gpu": group.config.gpu.name,
         "tensor_parallel": group.config.parallel.tensor_parallel}
        for group in run.group_of
    ]  # fmt: skip


def outputs(
    cfg: SimConfig, run: Assembly, percentiles: tuple[float, ...], wall_s: float
) -> RunOutput:
    """The frames and summary of a simulated run (a fleet's with its per-replica table)."""
    first = run.inputs.groups[0]
    computes = [_compute(group.config) for group in run.group_of]
    if run.fleet is None:
        frames = _with_tiers(run, run.engine.recorder.frames())
        summary = summarize(
            frames, cfg.slo, usage_capacity(first.config, first.sizing), percentiles
        )
        summary.update(utilisation_summary(utilisation(frames, computes)))
        if run.tiers is not None:
            summary.update(tier_summary(frames.requests, run.tiers.totals()))
        return RunOutput(cfg, first.sizing, frames, summary, wall_s)
    each = [engine.recorder.frames() for engine in run.replicas]
    disagg = run.fleet.disagg
    serving = None if disagg is None else run.fleet.serving
    combined = combine(each, np.frombuffer(run.fleet.replica_of, dtype=np.int64), serving)
    if disagg is not None:
        requests = with_paths(combined.requests, each, disagg.columns())
        combined = replace(combined, requests=requests)
    combined = _with_tiers(run, combined)
    capacities = [usage_capacity(group.config, group.sizing) for group in run.group_of]
    labels = _labels(run)
    summary, replicas = fleet_summary(
        each, combined, capacities, labels, cfg.slo, percentiles, serving
    )
    used = utilisation(combined, computes)
    summary.update(utilisation_summary(used))
    replicas = replicas.assign(busy_frac=used.busy_frac, mfu_frac=used.mfu_frac)
    if disagg is not None:
        net = disagg.net
        dropped = 0 if disagg.back is None else disagg.back.dropped
        summary.update(disagg_summary(
            combined.requests, [*net.egress_busy_s, *net.ingress_busy_s], summary["duration_s"],
            dropped,
        ))  # fmt: skip
        replicas = replicas.assign(
            role=disagg.roles, kv_bytes_out=net.sent_bytes, kv_bytes_in=net.received_bytes
        )
    if run.tiers is not None:
        summary.update(tier_summary(combined.requests, run.tiers.totals()))
    return RunOutput(cfg, first.sizing, combined, summary, wall_s, replicas=replicas)


def _with_tiers(run: Assembly, frames: RunFrames) -> RunFrames:
    """``frames`` with the tier columns and the tiers' occupancy, for a run with KV tiers."""
    if run.tiers is None:
        return frames
    requests = with_tiers(frames.requests, run.tiers.columns())
    return replace(frames, requests=requests, tiers=pd.DataFrame(run.tiers.occupancy()))


def _compute(cfg: SimConfig) -> ReplicaCompute:
    """What one replica of ``cfg`` computes with (:mod:`simkv.metrics.utilisation`)."""
    tp = cfg.parallel.tensor_parallel
    return ReplicaCompute(
        cfg.model.gemm_flops_per_token, cfg.model.gemm_flops_per_seq,
        tp * cfg.gpu.peak_flops_per_s,
    )  # fmt: skip


def simulate(
    cfg: SimConfig,
    base_dir: Path,
    *,
    progress: ProgressFn | None = None,
    check_invariants: bool = False,
    fast_forward: bool = True,
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES,
) -> RunOutput:
    """Run one simulation (one engine, or a fleet of replica groups); deterministic for a
    given config (its ``seed`` included; :class:`~simkv.run.assemble.Stream`).

    ``fast_forward`` advances steadily decoding requests lazily (simkv.engine.lazy), same
    results; ``percentiles`` (0–100) are added to the summary's
    (:func:`~simkv.metrics.summary.summarize`).
    """
    started = time.perf_counter()
    run = build(
        cfg, base_dir, progress=progress, check_invariants=check_invariants,
        fast_forward=fast_forward,
    )  # fmt: skip
    (run.engine if run.fleet is None else run.fleet).run()
    return outputs(cfg, run, percentiles, time.perf_counter() - started)


def file_summary(out: RunOutput) -> dict[str, float | None]:
    """The run's ``summary.json``: its summary and the KV pool's sizing."""
    sizing = {
        "kv_num_blocks": out.sizing.num_blocks,
        "kv_block_bytes": out.sizing.block_bytes,
        "kv_swap_blocks": out.sizing.swap_blocks,
        "kv_token_slots": out.sizing.token_slots,
    }
    return {**out.summary, **sizing}


def write_run(out: RunOutput, out_dir: Path, fmt: FrameFormat = FrameFormat.parquet) -> list[Path]:
    """Write the run's files into ``out_dir`` (frames as ``fmt``), each atomically
    (:func:`simkv.outputs.write_file`); returns the paths written."""
    make_folder(out_dir)
    frames = write_frames(out.frames, out_dir, fmt)
    for stale in FrameFormat:  # a run folder holds one format: a rerun's old frames go
        if stale is not fmt:
            for path in frames:
                path.with_suffix(f".{stale.value}").unlink(missing_ok=True)
    paths = {
        "summary": out_dir / "summary.json",
        "config": out_dir / "config.resolved.yaml",
    }
    summary = json.dumps(file_summary(out), indent=2, allow_nan=False)  # valid JSON only
    write_file(paths["summary"], summary + "\n")
    if out.replicas is not None:
        paths["replicas"] = out_dir / "replicas.json"
        write_file(paths["replicas"], out.replicas.to_json(orient="records", indent=2) + "\n")
    else:
        (out_dir / "replicas.json").unlink(missing_ok=True)  # a rerun without a fleet
    write_file(paths["config"], dump_resolved(out.config))
    return [*frames, *paths.values()]
