"""Summary statistics of one run, named as vLLM's serving benchmark names them.

Latency percentiles use numpy's default (linear) interpolation, as vLLM's benchmark does.
Each latency gets ``mean_``, ``median_``, ``std_`` (population, as numpy's default) and
``p{q}_`` for q in :data:`DEFAULT_PERCENTILES` plus any requested (``p99.9_ttft_ms``: vLLM's
``p_word``, an integer without decimals). ``total_input_tokens`` / ``total_output_tokens`` count
the finished requests' prompt and generated tokens. ``max_output_tokens_per_s`` is the most output
tokens that came out in one 1-second window from the first arrival (decode tokens at their step's
end, first tokens at ``first_token_s``), as vLLM's benchmark bins them; ``max_concurrent_requests``
is the most requests in the system (arrival to leaving) at any instant (the peak concurrency).
``offered_requests_per_s`` and ``arrival_cv`` describe the arrivals (see :func:`_arrivals`);
the ``slo_`` keys are the SLO verdict of :func:`simkv.metrics.slo.verdict`.
``duration_s`` runs from the first arrival to the last completion. TTFT, TPOT and E2EL of each
finished request are :func:`simkv.metrics.latency.request_latencies` (TPOT only for requests
with more than one output token per sequence). ITL
percentiles are over every inter-token gap (weighted samples, see :mod:`simkv.metrics.recorder`).
Memory figures are time-weighted by step duration. ``mean_fork_saving`` is
``1 - Σ fork_blocks / Σ fork_blocks_independent`` over steps (duration-weighted): the share of
blocks that forked multi-sequence requests did not need thanks to sharing (None without forks).
``generated_tokens`` of a multi-sequence request counts every sequence's tokens.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from simkv.config.sections import GIB, SLOConfig
from simkv.metrics.latency import request_latencies
from simkv.metrics.recorder import RunFrames
from simkv.metrics.slo import verdict
from simkv.metrics.text import percentile_label

DEFAULT_PERCENTILES: tuple[float, ...] = (90.0, 99.0)  # always present: reports read p90/p99
WASTE_COLUMNS = (
    "token_slots", "reserved_slots", "internal_frag_slots", "external_frag_slots", "free_slots",
)  # fmt: skip


def weighted_percentiles(values: np.ndarray, counts: np.ndarray, qs: list[float]) -> list[float]:
    """``np.percentile(np.repeat(values, counts), q)`` for each ``q`` in ``qs``, without
    materialising the repeat (and sorting once)."""
    order = np.argsort(values, kind="stable")
    v, c = values[order], np.cumsum(counts[order])
    out = []
    for q in qs:
        h = (c[-1] - 1) * q / 100.0
        lo, hi = int(np.floor(h)), int(np.ceil(h))
        v_lo = v[np.searchsorted(c, lo, side="right")]
        v_hi = v[np.searchsorted(c, hi, side="right")]
        out.append(float(v_lo + (v_hi - v_lo) * (h - lo)))
    return out


def stat_labels(percentiles: tuple[float, ...]) -> list[tuple[str, float | None]]:
    """``(label, q)`` of each statistic: mean, median, std (q None), then the percentiles."""
    qs = sorted(set(DEFAULT_PERCENTILES) | set(percentiles))
    return [("mean", None), ("median", 50.0), ("std", None)] + [
        (percentile_label(q), q) for q in qs
    ]


def latency_stats(
    name: str,
    values_ms: np.ndarray,
    out: dict[str, float | None],
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES,
) -> None:
    """Every statistic of :func:`stat_labels` as ``{label}_{name}_ms`` (None when empty)."""
    for label, q in stat_labels(percentiles):
        key = f"{label}_{name}_ms"
        if len(values_ms) == 0:
            out[key] = None
        elif q is not None:
            out[key] = float(np.percentile(values_ms, q))
        else:
            out[key] = float(np.mean(values_ms) if label == "mean" else np.std(values_ms))


def _itl_stats(
    itl: pd.DataFrame, out: dict[str, float | None], percentiles: tuple[float, ...]
) -> None:
    values = itl["itl_s"].to_numpy() * 1e3
    counts = itl["count"].to_numpy()
    total = counts.sum()
    labels = stat_labels(percentiles)
    qs = [q for _, q in labels if q is not None]
    at = dict(zip(qs, weighted_percentiles(values, counts, qs), strict=True)) if total else {}
    mean = float(np.sum(values * counts) / total) if total else 0.0
    for label, q in labels:
        key = f"{label}_itl_ms"
        if total == 0:
            out[key] = None
        elif q is not None:
            out[key] = at[q]
        elif label == "mean":
            out[key] = mean
        else:
            out[key] = float(np.sqrt(np.sum(counts * (values - mean) ** 2) / total))


def _peaks(req: pd.DataFrame, steps: pd.DataFrame, out: dict[str, float | None]) -> None:
    """``max_output_tokens_per_s`` (1-second windows) and ``max_concurrent_requests``."""
    if len(req) == 0:
        out["max_output_tokens_per_s"] = out["max_concurrent_requests"] = 0
        return
    start = float(req["arrival_s"].min())
    firsts = req[req["first_token_s"].notna()]  # each sequence's first token
    ends = (steps["time_s"] + steps["duration_s"]).to_numpy()
    times = np.concatenate([ends, firsts["first_token_s"].to_numpy()]) - start
    weights = np.concatenate([steps["decode_tokens"], firsts["num_seqs"]]).astype(np.float64)
    # only the seconds that hold tokens: a run spanning 10^9 s needs no 10^9 bins
    _, bins = np.unique(np.maximum(np.floor(times), 0), return_inverse=True)
    per_s = np.bincount(bins.ravel(), weights=weights)
    out["max_output_tokens_per_s"] = float(np.max(per_s, initial=0.0))
    left = req["finish_s"].notna()
    at = np.concatenate([req["arrival_s"].to_numpy(), req.loc[left, "finish_s"].to_numpy()])
    delta = np.concatenate([np.ones(len(req)), -np.ones(int(left.sum()))])
    order = np.lexsort((delta, at))  # at equal times, departures first
    out["max_concurrent_requests"] = int(np.max(np.cumsum(delta[order]), initial=0))


def _arrivals(req: pd.DataFrame, out: dict[str, float | None]) -> None:
    """The offered load: ``offered_requests_per_s`` (arrivals after the first over the arrival
    span) and ``arrival_cv`` (coefficient of variation of inter-arrival times: 1 for Poisson,
    above 1 burstier); None with fewer than two arrivals or a zero span."""
    gaps = np.diff(np.sort(req["arrival_s"].to_numpy()))
    span = float(gaps.sum())
    out["offered_requests_per_s"] = len(gaps) / span if span > 0 else None
    out["arrival_cv"] = float(gaps.std() / gaps.mean()) if span > 0 else None


def _good(done: pd.DataFrame, ttft_ms: pd.Series, tpot_ms: pd.Series, slo: SLOConfig) -> int:
    ok = np.ones(len(done), dtype=bool)
    if slo.ttft_ms is not None:
        ok &= (ttft_ms <= slo.ttft_ms).to_numpy()
    if slo.tpot_ms is not None:
        ok &= (tpot_ms.fillna(0.0) <= slo.tpot_ms).to_numpy()
    if slo.e2el_ms is not None:
        ok &= ((done["finish_s"] - done["arrival_s"]) * 1e3 <= slo.e2el_ms).to_numpy()
    return int(ok.sum())


def _memory_stats(steps: pd.DataFrame, total_blocks: int, out: dict[str, float | None]) -> None:
    w = steps["duration_s"].to_numpy()
    if len(steps) == 0 or w.sum() <= 0:
        return
    used = steps["blocks_used"].to_numpy() / total_blocks
    out["mean_kv_usage"] = float(np.average(used, weights=w))
    out["peak_kv_usage"] = float(used.max())
    slots = steps[list(WASTE_COLUMNS)].to_numpy(dtype=np.float64)
    fractions = (slots * w[:, None]).sum(axis=0) / (slots.sum(axis=1) * w).sum()
    for name, frac in zip(WASTE_COLUMNS, fractions, strict=True):
        out[f"mean_{name.removesuffix('_slots')}_frac"] = float(frac)


def _counts(req: pd.DataFrame, done: pd.DataFrame) -> dict[str, float | None]:
    """Request counts, ``duration_s`` and the finished requests' token totals."""
    duration = float(done["finish_s"].max() - req["arrival_s"].min()) if len(done) else 0.0
    return {
        "num_requests": len(req),
        "completed": len(done),
        "rejected": int((req["status"] == "rejected").sum()),
        "aborted": int((req["status"] == "aborted").sum()),
        "truncated": int(done["truncated"].sum()),
        "duration_s": duration,
        "total_input_tokens": int(done["prompt_tokens"].sum()),
        "total_output_tokens": int(done["generated_tokens"].sum()),
    }


def summarize(
    frames: RunFrames,
    slo: SLOConfig,
    total_blocks: int,
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES,
) -> dict[str, float | None]:
    """The run's summary: counts, throughput, goodput, latency statistics, KV figures.

    ``percentiles`` (0–100) are added to :data:`DEFAULT_PERCENTILES` for every latency."""
    req, steps = frames.requests, frames.steps
    percentiles = (*percentiles, slo.percentile)
    done = req[req["status"] == "finished"]
    out = _counts(req, done)
    duration = out["duration_s"] or 0.0
    rate = 1.0 / duration if duration > 0 else 0.0
    latency = request_latencies(done)  # simkv.metrics.latency: the one definition
    ttft_ms, tpot_ms = latency["ttft_ms"], latency["tpot_ms"]
    out["request_throughput"] = len(done) * rate
    out["output_throughput"] = float(done["generated_tokens"].sum()) * rate
    out["total_token_throughput"] = (
        float(done["prompt_tokens"].sum() + done["generated_tokens"].sum()) * rate
    )
    has_slo = any(v is not None for v in (slo.ttft_ms, slo.tpot_ms, slo.e2el_ms))
    out["request_goodput"] = _good(done, ttft_ms, tpot_ms, slo) * rate if has_slo else None
    _peaks(req, steps, out)
    _arrivals(req, out)
    latency_stats("ttft", ttft_ms.to_numpy(), out, percentiles)
    latency_stats("tpot", tpot_ms.dropna().to_numpy(), out, percentiles)
    _itl_stats(frames.itl, out, percentiles)
    latency_stats("e2el", latency["e2el_ms"].to_numpy(), out, percentiles)
    queue_ms = ((done["first_scheduled_s"] - done["arrival_s"]) * 1e3).to_numpy()
    out["mean_queue_ms"] = float(queue_ms.mean()) if len(queue_ms) else None
    out["num_steps"] = len(steps)
    out["preemptions"] = int(req["preemptions"].sum())
    out["recomputed_tokens"] = int(req["recomputed_tokens"].sum())
    out["swap_gib"] = float(req["swapped_bytes"].sum()) / GIB
    _memory_stats(steps, total_blocks, out)
    _prefix_stats(req, steps, out)
    out["mean_fork_saving"] = _fork_saving(steps)
    latencies = {key: latency[key].to_numpy() for key in ("ttft_ms", "tpot_ms", "e2el_ms")}
    out.update(verdict(out, latencies, slo))  # type: ignore[arg-type]
    return finite_or_none(out)


def finite_or_none(summary: dict[str, float | None]) -> dict[str, float | None]:
    """``summary`` with every value that is not a finite number as None: JSON has no infinity
    or NaN (``json.dumps`` would write ``Infinity``, which no JSON reader takes). The config's
    ranges keep every figure finite; this is the guarantee if arithmetic ever overflows."""
    return {key: None if isinstance(v, float) and not math.isfinite(v) else v
            for key, v in summary.items()}  # fmt: skip


def _fork_saving(steps: pd.DataFrame) -> float | None:
    """Duration-weighted share of blocks saved by fork sharing; None when nothing forked."""
    if "fork_blocks_independent" not in steps or len(steps) == 0:
        return None
    w = steps["duration_s"].to_numpy()
    independent = float(np.dot(steps["fork_blocks_independent"].to_numpy(), w))
    if independent <= 0:
        return None
    return 1.0 - float(np.dot(steps["fork_blocks"].to_numpy(), w)) / independent


def _prefix_stats(req: pd.DataFrame, steps: pd.DataFrame, out: dict[str, float | None]) -> None:
    """Prefix-cache figures over the requests that were admitted (hits at first admission)."""
    admitted = req[req["first_scheduled_s"].notna()]
    prompts = int(admitted["prompt_tokens"].sum())
    hits = int(admitted["prefix_hit_tokens"].sum())
    out["prefix_hit_rate"] = hits / prompts if prompts else None
    out["prefix_hit_request_rate"] = (
        float((admitted["prefix_hit_tokens"] > 0).mean()) if len(admitted) else None
    )
    out["prefill_tokens_saved"] = int(req["cache_hit_tokens"].sum())
    out["evictions"] = int(steps["evictions"].iloc[-1]) if len(steps) else 0
    w = steps["duration_s"].to_numpy()
    if len(steps) and w.sum() > 0:
        out["mean_cached_blocks"] = float(np.average(steps["cached_blocks"], weights=w))
        out["mean_shared_slots"] = float(np.average(steps["shared_slots"], weights=w))
        out["peak_shared_slots"] = int(steps["shared_slots"].max())
