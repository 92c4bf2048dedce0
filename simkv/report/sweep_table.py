"""The "All runs" table of the sweep report, shaped to fit the page.

One row per run in sweep order: its number (``#``, as the Pareto labels; its folder
``runs/<run id>`` is the number's tooltip, the axis values name the run), axis values,
status, whether it meets the SLOs (when any run sets one), the key metrics under short headers
(:data:`TABLE_METRICS`; the full column name is the header's tooltip and listed in the key
under the table) and, when a run failed, the errors. By the report conventions (9), no word is
ever broken: headers and errors wrap at spaces only, ids and axis names not at all, and
latencies are :func:`~simkv.report.conventions.format_ms` (ms below 10 s, then s) with
their unit in the cell; every column of ``sweep.parquet`` stays in that file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from markupsafe import Markup, escape

from simkv.report.conventions import format_ms
from simkv.report.sweep_folder import STATUS_OK, SweepFolder, axis_value, py_value, run_number


def _rate(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _gib(value: float) -> str:
    return f"{value:,.2f}"


TABLE_METRICS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("request_throughput", "req/s", _rate),
    ("request_goodput", "goodput req/s", _rate),
    ("median_ttft_ms", "p50 TTFT", format_ms),
    ("p99_ttft_ms", "p99 TTFT", format_ms),
    ("p99_tpot_ms", "p99 TPOT", format_ms),
    ("p99_e2el_ms", "p99 E2EL", format_ms),
    ("preemptions", "preemptions", _count),
    ("swap_gib", "swap GiB", _gib),
    ("mean_kv_usage", "KV used", _pct),
    ("mean_token_frac", "KV tokens", _pct),
    ("prefix_hit_rate", "prefix hits", _pct),
)
"""(summary column, short header, cell format). A column without a value is left out, and so
are the prefix hit rate and swap traffic when they are zero for every run."""
ZERO_HIDDEN = ("prefix_hit_rate", "swap_gib")


@dataclass(frozen=True)
class Header:
    """A column header: its (escaped, wrappable) text, tooltip, and whether cells are numbers."""

    text: Markup
    title: str
    numeric: bool


@dataclass(frozen=True)
class RunsTable:
    """The table: headers, rows (``ok``, ``folder``, cells as (text, numeric)), the key of
    short headers."""

    header: list[Header]
    rows: list[dict[str, Any]]
    key: list[tuple[str, str]]


def _shown(table: pd.DataFrame, column: str) -> bool:
    if column not in table.columns or not table[column].notna().any():
        return False
    return column not in ZERO_HIDDEN or bool((table[column].astype("float64") > 0).any())


def runs_table(sweep: SweepFolder, met: pd.Series | None) -> RunsTable:
    """The runs table of ``sweep``; ``met`` (per row, meets the SLOs) adds an ``SLO met``
    column."""
    metrics = [m for m in TABLE_METRICS if _shown(sweep.table, m[0])]
    header = [Header(Markup("#"), "run number (Pareto labels); its folder is the tooltip", True)]
    header += [Header(escape(axis), axis, False) for axis in sweep.axes]
    header.append(Header(Markup("status"), "status", False))
    if met is not None:
        header.append(Header(Markup("SLO met"), "p99 of every set SLO within it", False))
    header += [Header(escape(short), column, True) for column, short, _ in metrics]
    failed = bool((sweep.table["status"] != STATUS_OK).any())
    if failed:
        header.append(Header(Markup("error"), "error", False))
    rows = []
    for index, row in sweep.table.iterrows():
        ok = row["status"] == STATUS_OK
        cells = [(str(run_number(index)), True)]
        cells += [(axis_value(row[axis]), False) for axis in sweep.axes]
        cells.append((str(row["status"]), False))
        if met is not None:
            cells.append(("yes" if met[index] else "no" if ok else "—", False))
        for column, _, fmt in metrics:
            value = py_value(row[column])
            cells.append(("—" if value is None else fmt(float(value)), True))
        if failed:
            cells.append((py_value(row["error"]) or "", False))
        rows.append({"ok": ok, "folder": f"runs/{row['run_id']}", "cells": cells})
    key = [(short, column) for column, short, _ in metrics]
    return RunsTable(header, rows, key)
