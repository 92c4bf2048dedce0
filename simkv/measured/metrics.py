"""Summary statistics of a measured run, with simkv's conventions and key names.

The keys are those of :func:`simkv.metrics.summary.summarize`, so a measured and a simulated
summary join on keys: ``num_requests``, ``completed``, ``duration_s`` (first arrival to last
completion, s), ``request_throughput`` (requests/s), ``output_throughput`` and
``total_token_throughput`` (tokens/s) over that duration; ``mean_/median_/p90_/p99_`` of
``ttft_ms``, ``tpot_ms`` (``(e2el − ttft) / (output_tokens − 1)`` for requests with more than one
output token), ``e2el_ms``, and ``itl_ms`` (every inter-token gap) when the format records
per-token times; ``mean_queue_ms`` (first scheduling − arrival) when it records scheduling.
Percentiles are numpy's linear ones, as in simkv's summary and vLLM's benchmark. A statistic
the data cannot give (e.g. TPOT when every request generated one token) is left out.
"""

from __future__ import annotations

import numpy as np

from simkv.measured.runs import MeasuredRun
from simkv.metrics.summary import latency_stats


def _throughput(run: MeasuredRun, out: dict[str, float | None]) -> None:
    req = run.requests
    finish_s = (req["arrival_s"] + req["e2el_s"]).to_numpy()
    if np.isnan(finish_s).all():
        return
    duration = float(np.nanmax(finish_s) - req["arrival_s"].min())
    out["duration_s"] = duration
    rate = 1.0 / duration if duration > 0 else 0.0
    out["request_throughput"] = len(req) * rate
    out["output_throughput"] = float(req["output_tokens"].sum()) * rate
    tokens = float(req["prompt_tokens"].sum() + req["output_tokens"].sum())
    out["total_token_throughput"] = tokens * rate


def measured_metrics(run: MeasuredRun) -> dict[str, float]:
    """The run's summary (see the module docstring); values in ms, s, requests/s, tokens/s."""
    req = run.requests
    out: dict[str, float | None] = {"num_requests": len(req), "completed": len(req)}
    _throughput(run, out)
    ttft_s, e2el_s = req["ttft_s"].to_numpy(), req["e2el_s"].to_numpy()
    output = req["output_tokens"].to_numpy()
    multi = (output > 1) & np.isfinite(ttft_s) & np.isfinite(e2el_s)
    tpot_ms = (e2el_s[multi] - ttft_s[multi]) * 1e3 / (output[multi] - 1)
    latency_stats("ttft", ttft_s[np.isfinite(ttft_s)] * 1e3, out)
    latency_stats("tpot", tpot_ms, out)
    if run.itl_s is not None:
        gaps = [g for g in run.itl_s if len(g)]
        latency_stats("itl", np.concatenate(gaps) * 1e3 if gaps else np.empty(0), out)
    latency_stats("e2el", e2el_s[np.isfinite(e2el_s)] * 1e3, out)
    if "first_scheduled_s" in req.columns:
        queue_ms = (req["first_scheduled_s"] - req["arrival_s"]).to_numpy() * 1e3
        out["mean_queue_ms"] = float(queue_ms.mean())
    return {key: float(value) for key, value in out.items() if value is not None}
