"""A fleet run's frames and summaries: the replicas' frames combined, per-replica rows, the
load imbalance.

The combined ``requests`` frame has one row per request (sorted by ``req_id``, as one
replica's) plus ``replica``, the index of the replica the router sent it to; ``steps`` is every
replica's steps in time order (by start, then replica) plus ``replica``; ``itl`` all samples;
``preemptions`` every replica's in time order (request ids are the fleet's).

The fleet summary is :func:`~simkv.metrics.summary.summarize` over the combined frames (KV
usage of each step row over its own replica's pool; ``evictions`` summed over replicas) plus:

* ``num_replicas``;
* ``outstanding_imbalance``: max / mean over replicas of the time-averaged outstanding
  requests (Little's law: Σ time in system / the fleet's duration), 1 when balanced;
* ``outstanding_cv``: their coefficient of variation (population std / mean).

The per-replica table has one row per replica: its group, GPU, TP, requests routed, and its
own summary's throughput, latency, KV and prefix-cache figures (:data:`REPLICA_COLUMNS`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simkv.config.sections import SLOConfig
from simkv.metrics.recorder import RunFrames
from simkv.metrics.summary import DEFAULT_PERCENTILES, finite_or_none, summarize

REPLICA_COLUMNS = (
    "completed", "rejected", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms",
    "mean_kv_usage", "peak_kv_usage", "prefix_hit_rate", "preemptions", "num_steps",
)  # fmt: skip
"""The figures of each replica's own summary in the per-replica table."""


def combine(
    frames: list[RunFrames], replica_of: np.ndarray, serving: list[int] | None = None
) -> RunFrames:
    """The fleet's frames from its replicas' (in replica order); ``replica_of[i]`` is request
    ``i``'s replica; ``serving``: the replicas whose requests rows are the fleet's (None:
    all; a prefill replica's rows are its prefills, :mod:`simkv.metrics.disagg`)."""
    own = frames if serving is None else [frames[r] for r in serving]
    requests = pd.concat([f.requests for f in own], ignore_index=True)
    requests = requests.sort_values("req_id", kind="stable", ignore_index=True)
    requests["replica"] = replica_of[requests["req_id"].to_numpy()]
    steps = pd.concat([f.steps.assign(replica=r) for r, f in enumerate(frames)])
    steps = steps.sort_values(["time_s", "replica"], kind="stable", ignore_index=True)
    itl = pd.concat([f.itl for f in frames], ignore_index=True)
    return RunFrames(requests=requests, steps=steps, itl=itl, preemptions=_preemptions(frames))


def _preemptions(frames: list[RunFrames]) -> pd.DataFrame | None:
    """Every replica's preemptions in time order (by time, then replica); None when a
    replica's were not recorded."""
    each = [f.preemptions for f in frames]
    if any(p is None for p in each):
        return None
    rows = pd.concat(each, ignore_index=True)  # type: ignore[arg-type]
    return rows.sort_values("time_s", kind="stable", ignore_index=True)


def mean_outstanding(
    requests: pd.DataFrame, num_replicas: int, duration_s: float | None = None
) -> np.ndarray:
    """Each replica's time-averaged outstanding requests over the fleet's duration (first
    arrival to last departure of ``requests``, or ``duration_s``): Σ (leaving − arrival) /
    duration."""
    if len(requests) == 0:
        return np.zeros(num_replicas)
    left = requests["finish_s"].fillna(requests["arrival_s"]).to_numpy()
    arrived = requests["arrival_s"].to_numpy()
    duration = float(left.max() - arrived.min()) if duration_s is None else duration_s
    busy = np.bincount(
        requests["replica"].to_numpy(), weights=left - arrived, minlength=num_replicas
    )
    return busy / duration if duration > 0 else np.zeros(num_replicas)


def imbalance(outstanding: np.ndarray) -> tuple[float | None, float | None]:
    """(max / mean, coefficient of variation) of per-replica loads; None when all are 0."""
    mean = float(outstanding.mean()) if len(outstanding) else 0.0
    if mean <= 0:
        return None, None
    return float(outstanding.max()) / mean, float(outstanding.std()) / mean


def fleet_summary(
    frames: list[RunFrames],
    combined: RunFrames,
    capacities: list[int],
    labels: list[dict[str, object]],
    slo: SLOConfig,
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES,
    serving: list[int] | None = None,
) -> tuple[dict[str, float | None], pd.DataFrame]:
    """The fleet's summary and its per-replica table. ``capacities[r]``: replica ``r``'s KV
    pool (blocks; slots for contiguous memory); ``labels[r]``: its group, GPU, TP;
    ``serving``: as :func:`combine` (the load imbalance is theirs; a prefill replica's
    ``routed`` and load count its prefills)."""
    per_row = np.asarray(capacities, dtype=np.float64)[combined.steps["replica"].to_numpy()]
    summary = summarize(combined, slo, per_row, percentiles)  # type: ignore[arg-type]
    summary["evictions"] = sum(
        int(f.steps["evictions"].iloc[-1]) if len(f.steps) else 0 for f in frames
    )
    n = len(frames)
    load = mean_outstanding(combined.requests, n)
    routed = np.bincount(combined.requests["replica"].to_numpy(), minlength=n)
    served = range(n) if serving is None else serving
    duration = summary.get("duration_s")
    for r in sorted(set(range(n)) - set(served)):  # prefill replicas: their own rows
        legs = frames[r].requests.assign(replica=0)
        load[r], routed[r] = mean_outstanding(legs, 1, duration)[0], len(legs)
    summary["num_replicas"] = n
    summary["outstanding_imbalance"], summary["outstanding_cv"] = imbalance(load[list(served)])
    rows = []
    for r, f in enumerate(frames):
        own = summarize(f, slo, capacities[r], percentiles)
        rows.append({
            "replica": r, **labels[r], "routed": int(routed[r]),
            "mean_outstanding": float(load[r]),
            **{name: own.get(name) for name in REPLICA_COLUMNS},
        })  # fmt: skip
    return finite_or_none(summary), pd.DataFrame(rows)
