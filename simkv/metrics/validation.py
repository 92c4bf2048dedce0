"""Simulated vs measured: one metric set for both sides, their Diff%, and the headline error.

Both sides are first brought to one *request frame*, one row per request in arrival order:

* ``arrival_s`` (s, any origin), ``prompt_tokens``, ``output_tokens`` (tokens the workload asked
  for; the replay check compares these);
* ``ttft_s`` = first token − arrival and ``e2el_s`` = last token − arrival (s; NaN for a request
  that did not complete, e.g. rejected by the simulated engine);
* optional ``generated_tokens`` (tokens the request produced; ``output_tokens`` when absent).

A measured run's ``requests`` frame (:class:`simkv.measured.MeasuredRun`) already has this shape;
:func:`simulated_request_frame` builds it from a run's ``requests.parquet``.
:func:`validation_metrics` then computes, the same way for both sides: mean, median, p90, p95
and p99 of TTFT, TPOT, ITL (given inter-token samples) and E2E latency in ms, request and output
throughput over first arrival → last completion, and the completed requests. Percentiles are
numpy's linear ones (:func:`simkv.metrics.summary.weighted_percentiles`); TPOT is
``(e2el − ttft) / (generated − 1)`` for completed requests that generated more than one token, as
in :mod:`simkv.metrics.summary`. Keys follow vLLM's benchmark names (``p95_ttft_ms`` …).

``diff_pct(sim, real) = (sim − real) / real · 100``; the headline error is the mean absolute
Diff% over :data:`HEADLINE_KEYS` (TTFT, TPOT, E2E × mean, p50, p90, p99: 12 values);
:mod:`simkv.metrics.saturation` marks a side in overload and splits the headline error there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from simkv.errors import InputError
from simkv.metrics.saturation import SaturationSplit, saturation_split
from simkv.metrics.summary import weighted_percentiles

STATS: tuple[tuple[str, str, float | None], ...] = (
    ("mean", "Mean", None), ("median", "Median", 50.0), ("p90", "P90", 90.0),
    ("p95", "P95", 95.0), ("p99", "P99", 99.0),
)  # fmt: skip
"""(key prefix, label, percentile; None = mean) of each latency statistic, in display order."""
LATENCIES: tuple[tuple[str, str], ...] = (
    ("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "Latency"),
)  # fmt: skip
"""(key, label) of each latency, in display order; labels as in LLMServingSim's summary."""
RATES: tuple[tuple[str, str], ...] = (
    ("request_throughput", "Request throughput (req/s)"),
    ("output_throughput", "Output throughput (tok/s)"),
    ("completed", "Requests completed"),
)
HEADLINE_KEYS: tuple[str, ...] = tuple(
    f"{stat}_{lat}_ms"
    for lat in ("ttft", "tpot", "e2el")
    for stat in ("mean", "median", "p90", "p99")
)
"""The 12 metrics whose mean absolute Diff% is the headline error."""

ItlSamples = tuple[np.ndarray, np.ndarray]
"""Inter-token gaps as weighted samples: (gaps_s, counts); each gap counted ``counts`` times."""


@dataclass(frozen=True)
class MetricRow:
    """One row of the comparison: vLLM-style ``key`` (``mean_ttft_ms``), display ``label``."""

    key: str
    label: str
    measured: float | None
    simulated: float | None

    @property
    def diff_pct(self) -> float | None:
        return diff_pct(self.simulated, self.measured)


@dataclass(frozen=True)
class Validation:
    """The comparison table, the headline error and what was left out.

    ``mean_abs_diff_pct`` is over the ``headline_count`` of the :data:`HEADLINE_KEYS` that have
    a Diff% (all 12 unless a measured value is 0 or missing); None when none has.
    ``saturation``: whether each side is in overload, and the headline error before and after
    the measured run saturated (:mod:`simkv.metrics.saturation`).
    """

    rows: tuple[MetricRow, ...]
    mean_abs_diff_pct: float | None
    headline_count: int
    notes: tuple[str, ...] = ()
    saturation: SaturationSplit | None = None


def diff_pct(sim: float | None, real: float | None) -> float | None:
    """``(sim − real) / real · 100`` (%); None when either is missing or ``real`` is 0."""
    if sim is None or real is None or real == 0 or not np.isfinite(real) or not np.isfinite(sim):
        return None
    return (sim - real) / real * 100.0


def mean_abs_diff_pct(rows: tuple[MetricRow, ...]) -> tuple[float | None, int]:
    """Mean |Diff%| over the :data:`HEADLINE_KEYS` rows that have one, and how many had one."""
    diffs = [row.diff_pct for row in rows if row.key in HEADLINE_KEYS]
    present = [abs(d) for d in diffs if d is not None]
    return (float(np.mean(present)) if present else None), len(present)


def _stats(name: str, values: np.ndarray, counts: np.ndarray) -> dict[str, float | None]:
    """``{stat}_{name}_ms`` of weighted samples (ms); None when there are none."""
    keep = counts > 0
    values, counts = values[keep], counts[keep]
    qs = [q for _, _, q in STATS if q is not None]
    at = iter(weighted_percentiles(values, counts, qs)) if len(values) else None
    out: dict[str, float | None] = {}
    for stat, _, q in STATS:
        if at is None:
            out[f"{stat}_{name}_ms"] = None
        elif q is None:
            out[f"{stat}_{name}_ms"] = float(np.sum(values * counts) / counts.sum())
        else:
            out[f"{stat}_{name}_ms"] = next(at)
    return out


def _ones(values: np.ndarray) -> ItlSamples:
    return values, np.ones(len(values), np.int64)


def latency_samples_ms(requests: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per-request ``ttft``, ``tpot`` and ``e2el`` (ms) of the completed requests of a request
    frame; TPOT only of those that generated more than one token."""
    ttft = requests["ttft_s"].to_numpy(np.float64)
    e2el = requests["e2el_s"].to_numpy(np.float64)
    generated = _generated(requests)
    done = _completed(requests)
    multi = done & (generated > 1)
    return {
        "ttft": ttft[done] * 1e3,
        "tpot": (e2el[multi] - ttft[multi]) * 1e3 / (generated[multi] - 1),
        "e2el": e2el[done] * 1e3,
    }


def _completed(requests: pd.DataFrame) -> np.ndarray:
    """Which requests completed: those with a first and a last token time."""
    return np.isfinite(requests["ttft_s"].to_numpy(np.float64)) & np.isfinite(
        requests["e2el_s"].to_numpy(np.float64)
    )


def _generated(requests: pd.DataFrame) -> np.ndarray:
    col = "generated_tokens" if "generated_tokens" in requests else "output_tokens"
    return requests[col].to_numpy(np.int64)


def validation_metrics(
    requests: pd.DataFrame, itl: ItlSamples | None = None
) -> dict[str, float | None]:
    """The metric set of one side (see the module docstring); ms, req/s, tokens/s.

    ``requests`` is a request frame; ``itl`` the run's inter-token gaps, or None when the side
    did not record them (then no ``*_itl_ms`` keys).
    """
    samples = latency_samples_ms(requests)
    out: dict[str, float | None] = {}
    out.update(_stats("ttft", *_ones(samples["ttft"])))
    out.update(_stats("tpot", *_ones(samples["tpot"])))
    if itl is not None:
        out.update(_stats("itl", itl[0] * 1e3, itl[1]))
    out.update(_stats("e2el", *_ones(samples["e2el"])))
    out.update(_throughput(requests))
    return out


def _throughput(requests: pd.DataFrame) -> dict[str, float | None]:
    """Completed requests and their output tokens per s over first arrival → last completion."""
    done = _completed(requests)
    arrival = requests["arrival_s"].to_numpy(np.float64)
    finish = arrival[done] + requests["e2el_s"].to_numpy(np.float64)[done]
    duration = float(finish.max() - arrival.min()) if done.any() else 0.0
    rate = 1.0 / duration if duration > 0 else None
    tokens = float(_generated(requests)[done].sum())
    return {
        "request_throughput": None if rate is None else int(done.sum()) * rate,
        "output_throughput": None if rate is None else tokens * rate,
        "completed": int(done.sum()),
    }


def simulated_request_frame(requests: pd.DataFrame) -> pd.DataFrame:
    """The request frame of a simulated run's ``requests.parquet``, in workload order.

    Rows are sorted by ``req_id`` (the workload's order, which is arrival order); only
    finished requests have a ``ttft_s`` and ``e2el_s``. Multi-sequence requests cannot be the
    replay of a measured run: an :class:`InputError`.
    """
    if (requests["num_seqs"] > 1).any():
        raise InputError("the simulated run has multi-sequence requests: not a measured replay")
    req = requests.sort_values("req_id", kind="stable")
    finished = (req["status"] == "finished").to_numpy()
    arrival = req["arrival_s"].to_numpy(np.float64)
    return pd.DataFrame(
        {
            "arrival_s": arrival,
            "prompt_tokens": req["prompt_tokens"].to_numpy(np.int64),
            "output_tokens": req["output_tokens"].to_numpy(np.int64),
            "ttft_s": np.where(finished, req["first_token_s"].to_numpy() - arrival, np.nan),
            "e2el_s": np.where(finished, req["finish_s"].to_numpy() - arrival, np.nan),
            "generated_tokens": req["generated_tokens"].to_numpy(np.int64),
        }
    )


def check_same_workload(measured: pd.DataFrame, simulated: pd.DataFrame) -> None:
    """Raise :class:`InputError` unless both request frames hold the same requests: the same
    count, and in arrival order the same prompt and output lengths and arrival offsets (µs)."""
    n_real, n_sim = len(measured), len(simulated)
    if n_real != n_sim:
        raise InputError(
            f"workload mismatch: the simulated run has {n_sim} requests, the measured run "
            f"{n_real}; simulate a replay of the whole measurement (workload kind: measured, "
            "no limit)"
        )
    arrival = {name: f["arrival_s"].to_numpy() - f["arrival_s"].min()
               for name, f in (("real", measured), ("sim", simulated))}  # fmt: skip
    checks = [
        (col, measured[col].to_numpy(), simulated[col].to_numpy())
        for col in ("prompt_tokens", "output_tokens")
    ]
    checks.append(("arrival_s", arrival["real"], arrival["sim"]))
    for col, real, sim in checks:
        bad = ~np.isclose(real, sim, rtol=0.0, atol=1e-6)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(
                f"workload mismatch: request {i} (arrival order) has {col} {sim[i]:g} in the "
                f"simulated run but {real[i]:g} in the measured run ({int(bad.sum())} requests "
                "differ); the run must be a replay of the measurement (workload kind: measured)"
            )


def compare_metrics(
    measured: pd.DataFrame,
    simulated: pd.DataFrame,
    *,
    measured_itl: ItlSamples | None = None,
    simulated_itl: ItlSamples | None = None,
) -> Validation:
    """Check the workloads match, then compute both sides' metric sets and their Diff%.

    ITL rows appear only when both sides have inter-token samples (else a note says why).
    """
    check_same_workload(measured, simulated)
    both_itl = measured_itl is not None and simulated_itl is not None
    real = validation_metrics(measured, measured_itl if both_itl else None)
    sim = validation_metrics(simulated, simulated_itl if both_itl else None)
    rows = []
    for lat, lat_label in LATENCIES:
        if lat == "itl" and not both_itl:
            continue
        for stat, stat_label, _ in STATS:
            key = f"{stat}_{lat}_ms"
            rows.append(MetricRow(key, f"{lat_label} {stat_label}", real[key], sim[key]))
    rows += [MetricRow(key, label, real[key], sim[key]) for key, label in RATES]
    notes = () if both_itl else (_itl_note(measured_itl, simulated_itl),)
    headline, count = mean_abs_diff_pct(tuple(rows))
    split = saturation_split(measured, simulated, _headline_error)
    return Validation(tuple(rows), headline, count, notes, split)


def _headline_error(measured: pd.DataFrame, simulated: pd.DataFrame) -> float | None:
    """The headline error (mean |Diff%| over :data:`HEADLINE_KEYS`) of two request frames."""
    real, sim = validation_metrics(measured), validation_metrics(simulated)
    return mean_abs_diff_pct(tuple(MetricRow(k, k, real[k], sim[k]) for k in HEADLINE_KEYS))[0]


def _itl_note(measured: ItlSamples | None, simulated: ItlSamples | None) -> str:
    if measured is None and simulated is None:
        return "ITL left out: neither run has per-token times"
    side = "measured" if measured is None else "simulated"
    return f"ITL left out: no per-token times in the {side} run"
