"""Summary statistics of a measured run, with simkv's conventions and key names.

The latencies and rates are :func:`simkv.metrics.validation.validation_metrics` of the run's
request frame (the same function prices the simulated side of ``simkv compare``): ``mean_``,
``median_``, ``p90_``, ``p95_``, ``p99_`` of ``ttft_ms``, ``tpot_ms``, ``e2el_ms`` and, when
the format records per-token times, ``itl_ms``; ``request_throughput`` and
``output_throughput``; ``completed``. Added here: ``num_requests``, ``duration_s`` (first
arrival to last completion), ``total_token_throughput`` (tokens/s) and ``mean_queue_ms``
(first scheduling − arrival) when the format records scheduling. A statistic the data cannot
give (e.g. TPOT when every request generated one token) is left out.
"""

from __future__ import annotations

import numpy as np

from simkv.measured import MeasuredRun
from simkv.metrics.validation import validation_metrics


def measured_metrics(run: MeasuredRun) -> dict[str, float]:
    """The run's summary (see the module docstring); values in ms, s, requests/s, tokens/s."""
    req = run.requests
    itl = None
    if run.itl_s is not None:
        gaps = np.concatenate([g for g in run.itl_s if len(g)] or [np.empty(0)])
        itl = (gaps, np.ones(len(gaps), np.int64))
    out: dict[str, float | None] = {"num_requests": len(req), **validation_metrics(req, itl)}
    finish_s = (req["arrival_s"] + req["e2el_s"]).to_numpy()
    if not np.isnan(finish_s).all():
        duration = float(np.nanmax(finish_s) - req["arrival_s"].min())
        out["duration_s"] = duration
        tokens = float(req["prompt_tokens"].sum() + req["output_tokens"].sum())
        out["total_token_throughput"] = tokens / duration if duration > 0 else None
    if "first_scheduled_s" in req.columns:
        queue_ms = (req["first_scheduled_s"] - req["arrival_s"]).to_numpy() * 1e3
        out["mean_queue_ms"] = float(queue_ms.mean())
    return {key: float(value) for key, value in out.items() if value is not None}
