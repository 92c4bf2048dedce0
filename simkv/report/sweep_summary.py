"""What a sweep report concludes from its table: SLOs met, the best run, the knee of a rate sweep.

Pure functions of the sweep table (one row per run, as in ``sweep.parquet``) plus the SLO
columns :func:`simkv.report.sweep_report.load_sweep_folder` adds from the runs' resolved
configs (``slo_ttft_ms``, ``slo_tpot_ms``, ``slo_e2el_ms``; NaN where a run sets none). Only
finished runs are judged.

A run *meets the SLOs* as :mod:`simkv.metrics.slo` defines it (p99 TTFT ≤ ``slo.ttft_ms`` …),
here judged on the table's columns; the latency charts draw the same p99 against the SLO
lines. A sweep's *main objective* is request goodput when any run sets an SLO (and goodput was
recorded), else request throughput.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from simkv.metrics.slo import SLO_KEYS
from simkv.metrics.text import percentile_label

THROUGHPUT = "request_throughput"
GOODPUT = "request_goodput"
RATE_AXES = ("workload.rate", "workload.arrival.rate")
"""Axes that set the offered load in requests/s: a sweep over one of them has a knee."""
DEPARTURE_FACTOR = 2.0
"""p99 TTFT *departs* from its low-load level where it first exceeds this multiple of its value
at the lowest rate of the sweep (the issue's "where p99 TTFT departs"; 2× is well above the
run-to-run noise of an unsaturated engine and well below a queue's growth past saturation)."""


def slo_column(key: str) -> str:
    """The table column holding each run's ``slo.<key>`` (ms), e.g. ``slo_ttft_ms``."""
    return f"slo_{key}"


def has_slo(table: pd.DataFrame) -> bool:
    """True when some run of the table sets an SLO."""
    columns = [slo_column(key) for key, _, _ in SLO_KEYS if slo_column(key) in table.columns]
    return bool(columns) and bool(table[columns].notna().to_numpy().any())


def meets_slo(table: pd.DataFrame) -> pd.Series:
    """Per row: True when the run sets at least one SLO and its p99 of each is within it;
    a run's own verdict (``slo_pass``, judged at its ``slo.percentile``) where it has one.

    A p99 that is missing (no finished request) fails the SLO it is judged against.
    """
    met = pd.Series(False, index=table.index)
    any_set = pd.Series(False, index=table.index)
    ok = pd.Series(True, index=table.index)
    for key, metric, _ in SLO_KEYS:
        column = slo_column(key)
        if column not in table.columns:
            continue
        limit = table[column].astype("float64")
        value = table[metric].astype("float64") if metric in table.columns else limit * np.nan
        is_set = limit.notna()
        any_set |= is_set
        ok &= ~is_set | (value <= limit).fillna(False)
    met[any_set & ok] = True
    if "slo_pass" in table.columns:  # the runs' own verdict, at their slo.percentile
        judged = table["slo_pass"].astype("boolean")
        met = judged.fillna(met).astype(bool) & any_set
    return met


def percentile_text(table: pd.DataFrame) -> str:
    """The percentile the runs' SLOs are judged at, as ``p99`` (``p95 / p99`` if they differ;
    p99 for runs recorded before ``slo.percentile`` existed)."""
    qs = table["slo_percentile"].dropna() if "slo_percentile" in table.columns else []
    labels = sorted({percentile_label(float(q)) for q in qs}) or [percentile_label(99.0)]
    return " / ".join(labels)


def objective(table: pd.DataFrame) -> str:
    """The main objective's column: goodput when SLOs are set and goodput recorded."""
    if has_slo(table) and GOODPUT in table.columns and table[GOODPUT].notna().any():
        return GOODPUT
    return THROUGHPUT


def best_row(table: pd.DataFrame, metric: str) -> int | None:
    """Index label of the row with the highest ``metric``; ties go to the lower p99 TTFT,
    then to the earlier row. None when no row has a value."""
    if metric not in table.columns:
        return None
    values = table[metric].astype("float64")
    if values.isna().all():
        return None
    ttft = table.get("p99_ttft_ms", pd.Series(np.nan, index=table.index)).astype("float64")
    order = pd.DataFrame({"v": -values, "t": ttft.fillna(np.inf), "i": range(len(table))},
                         index=table.index).dropna(subset=["v"])  # fmt: skip
    return order.sort_values(["v", "t", "i"], kind="stable").index[0]


@dataclass(frozen=True)
class Knee:
    """The knee of one line of a rate sweep (x values in requests/s).

    ``meets_up_to``: the highest rate such that every run at or below it meets the SLOs
    (None without SLOs, or when the lowest rate already fails). ``departs_at``: the first rate
    whose p99 TTFT exceeds :data:`DEPARTURE_FACTOR` × the lowest rate's (None if none does).
    """

    meets_up_to: float | None
    departs_at: float | None


def knee(rates: np.ndarray, rows: pd.DataFrame, judge_slo: bool) -> Knee:
    """The knee of one line: ``rates[i]`` is the offered rate of ``rows``' i-th row."""
    order = np.argsort(rates, kind="stable")
    xs = rates[order]
    meets_up_to = None
    if judge_slo:
        met = meets_slo(rows).to_numpy()[order]
        failing = np.flatnonzero(~met)
        last = (failing[0] if failing.size else len(xs)) - 1
        meets_up_to = float(xs[last]) if last >= 0 else None
    departs_at = None
    if "p99_ttft_ms" in rows.columns and len(xs):
        ttft = rows["p99_ttft_ms"].to_numpy(dtype=float, na_value=np.nan)[order]
        above = np.flatnonzero(ttft > DEPARTURE_FACTOR * ttft[0]) if np.isfinite(ttft[0]) else []
        departs_at = float(xs[above[0]]) if len(above) else None
    return Knee(meets_up_to, departs_at)
