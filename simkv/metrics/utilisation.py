"""How busy a run kept its GPUs: busy time per replica and model FLOPs utilisation (MFU).

Both are shares of the run's *span*: from the first arrival to the end of the last step or the
last completion, whichever is later (the summary's ``duration_s`` plus any step after the last
completion).

* A replica's ``busy_frac`` is Σ its steps' ``duration_s`` / span: the share of the span its
  engine spent in forward passes (1 − it: idle, waiting for arrivals).
* A step's *model FLOPs* are the matmul FLOPs the cost model prices
  (:class:`simkv.engine.cost_model.RooflineCostModel`'s GEMM term):
  :attr:`~simkv.config.hardware.ModelSpec.gemm_flops_per_token` × its prefill + decode tokens
  plus :attr:`~simkv.config.hardware.ModelSpec.gemm_flops_per_seq` × its sequences
  (``batch_size``). Attention over the KV cache is left out, as MFU usually leaves it out.
* ``mfu_frac`` = Σ model FLOPs / span / Σ over replicas (tensor-parallel GPUs × the GPU's
  dense BF16 peak, :attr:`~simkv.config.hardware.GpuSpec.peak_flops_per_s`); a replica's own
  is the same over its steps and its GPUs.

Summary keys (:func:`utilisation_summary`): ``model_flops_per_s`` (Σ model FLOPs / span),
``mfu_frac``, ``mean_busy_frac`` and ``max_busy_frac`` (over replicas; one engine is one
replica).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simkv.metrics.recorder import RunFrames


@dataclass(frozen=True)
class ReplicaCompute:
    """What one replica computes with: its model's matmul FLOPs per token and per sampled
    sequence, and its peak FLOP/s (tensor-parallel GPUs × one GPU's dense peak)."""

    flops_per_token: float
    flops_per_seq: float
    peak_flops_per_s: float


@dataclass(frozen=True)
class Utilisation:
    """Per replica (in replica order): busy share of the span and MFU; and the run's span
    (s) and model FLOPs per second over it."""

    busy_frac: np.ndarray
    mfu_frac: np.ndarray
    span_s: float
    model_flops_per_s: float
    mfu_total_frac: float | None


def _span_s(frames: RunFrames) -> float:
    """First arrival to the later of the last step's end and the last completion."""
    req, steps = frames.requests, frames.steps
    if len(req) == 0 or len(steps) == 0:
        return 0.0
    step_end = float((steps["time_s"] + steps["duration_s"]).max())
    finish = float(req["finish_s"].max()) if req["finish_s"].notna().any() else step_end
    return max(step_end, finish) - float(req["arrival_s"].min())


def utilisation(frames: RunFrames, replicas: list[ReplicaCompute]) -> Utilisation:
    """Busy time and MFU of each replica and of the run (see the module docstring);
    ``frames.steps`` has a ``replica`` column for a fleet (none: replica 0)."""
    steps, n = frames.steps, len(replicas)
    if "replica" in steps.columns:
        which = steps["replica"].to_numpy(dtype=np.int64)
    else:
        which = np.zeros(len(steps), dtype=np.int64)
    per_token = np.array([r.flops_per_token for r in replicas])[which]
    per_seq = np.array([r.flops_per_seq for r in replicas])[which]
    tokens = (steps["prefill_tokens"] + steps["decode_tokens"]).to_numpy(dtype=np.float64)
    flops = per_token * tokens + per_seq * steps["batch_size"].to_numpy(dtype=np.float64)
    busy = np.bincount(which, weights=steps["duration_s"].to_numpy(), minlength=n)
    done = np.bincount(which, weights=flops, minlength=n)
    peaks = np.array([r.peak_flops_per_s for r in replicas])
    span = _span_s(frames)
    if span <= 0:
        zeros = np.zeros(n)
        return Utilisation(zeros, zeros, 0.0, 0.0, None)
    rate = float(done.sum()) / span
    return Utilisation(busy / span, done / span / peaks, span, rate, rate / float(peaks.sum()))


def utilisation_summary(used: Utilisation) -> dict[str, float | None]:
    """The summary keys of :func:`utilisation` (module docstring); None without a span."""
    if used.span_s <= 0:
        keys = ("model_flops_per_s", "mfu_frac", "mean_busy_frac", "max_busy_frac")
        return dict.fromkeys(keys)
    return {
        "model_flops_per_s": used.model_flops_per_s,
        "mfu_frac": used.mfu_total_frac,
        "mean_busy_frac": float(used.busy_frac.mean()),
        "max_busy_frac": float(used.busy_frac.max()),
    }
