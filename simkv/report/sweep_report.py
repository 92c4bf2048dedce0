"""The self-contained HTML comparison report of a sweep folder.

Built from what :func:`simkv.sweep.run.run_sweep` leaves in the folder: ``sweep.json`` (name,
axes, run ids) and ``sweep.parquet`` (one row per run: ``run_id``, ``status``, ``error``, the axis
columns, the summary metrics). Failed runs (``status != "ok"``) are listed in the runs table and
left out of every chart. Figures are inline SVG drawn under :data:`figures.REPORT_RC` and text
goes through the report's jinja2 environment (autoescape on), so the same folder always renders
to the same bytes and the page references nothing outside itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simkv.errors import InputError
from simkv.report import figures as fg
from simkv.report.run_folder import read_table
from simkv.report.run_report import (
    REPORT_FILE,
    FigureBlock,
    figure_block,
    format_value,
    report_environment,
)

STATUS_OK = "ok"
THROUGHPUT = "request_throughput"
LATENCY = "p99_ttft_ms"
CHART_METRICS: tuple[tuple[str, str], ...] = (
    ("request_throughput", "request throughput (req/s)"),
    ("request_goodput", "request goodput (req/s)"),
    ("p99_ttft_ms", "p99 TTFT (ms)"),
    ("p99_tpot_ms", "p99 TPOT (ms)"),
    ("preemptions", "preemptions"),
    ("mean_token_frac", "share of KV pool holding tokens"),
)
"""Metrics drawn against the sweep axis (column, axis label); absent or all-null ones skipped."""
TABLE_METRICS: tuple[str, ...] = (
    "request_throughput", "output_throughput", "request_goodput", "median_ttft_ms",
    "p99_ttft_ms", "p99_tpot_ms", "p99_e2el_ms", "preemptions", "swap_gib", "mean_kv_usage",
    "mean_token_frac",
)  # fmt: skip


@dataclass(frozen=True)
class SweepFolder:
    """A sweep folder read back: name, axes in sweep order, and the table in run order."""

    path: Path
    name: str
    axes: tuple[str, ...]
    table: pd.DataFrame

    @property
    def ok(self) -> pd.DataFrame:
        """The rows of runs that finished (the only rows charts use)."""
        return self.table[self.table["status"] == STATUS_OK]


def load_sweep_folder(sweep_dir: Path) -> SweepFolder:
    """Read ``sweep.json`` and ``sweep.parquet``; :class:`InputError` if missing or inconsistent."""
    for name in ("sweep.json", "sweep.parquet"):
        if not (sweep_dir / name).is_file():
            raise InputError(f"not a simkv sweep folder: missing {name}", file=sweep_dir)
    try:
        meta = json.loads((sweep_dir / "sweep.json").read_text(encoding="utf-8"))
        name, axes = str(meta["name"]), tuple(str(axis) for axis in meta["axes"])
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(f"unreadable sweep.json: {err}", file=sweep_dir / "sweep.json") from None
    table = read_table(sweep_dir / "sweep.parquet", ())
    missing = [c for c in ("run_id", "status", "error", *axes) if c not in table.columns]
    if missing:
        raise InputError(f"sweep.parquet lacks columns {', '.join(missing)}", file=sweep_dir)
    return SweepFolder(sweep_dir, name, axes, table.reset_index(drop=True))


def py_value(value: Any) -> Any:
    """A table cell as a plain Python value; ``None`` for every kind of missing value."""
    if value is None or (np.ndim(value) == 0 and pd.isna(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def is_numeric_axis(column: pd.Series) -> bool:
    """Numbers (not booleans), so the axis is drawn to scale rather than as categories."""
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def x_axis(sweep: SweepFolder) -> str | None:
    """The axis charts put on x: the first numeric axis, else the first (categorical) one."""
    numeric = [axis for axis in sweep.axes if is_numeric_axis(sweep.table[axis])]
    return (numeric or list(sweep.axes) or [None])[0]


def pareto_mask(throughput: np.ndarray, latency: np.ndarray) -> np.ndarray:
    """True where no other point has throughput ≥ and latency ≤ with one of them strict.

    Points with a NaN coordinate are never on the front and never dominate; equal points are
    on the front together.
    """
    valid = ~(np.isnan(throughput) | np.isnan(latency))
    front = valid.copy()
    for i in np.flatnonzero(valid):
        no_worse = valid & (throughput >= throughput[i]) & (latency <= latency[i])
        better = (throughput > throughput[i]) | (latency < latency[i])
        front[i] = not np.any(no_worse & better)
    return front


def _levels(column: pd.Series) -> list[Any]:
    """Distinct values of an axis: sorted when numeric, else in order of first appearance."""
    values = list(dict.fromkeys(py_value(v) for v in column))
    return sorted(v for v in values if v is not None) if is_numeric_axis(column) else values


def _point_label(row: pd.Series, axes: tuple[str, ...]) -> str:
    return ", ".join(f"{axis}={py_value(row[axis])}" for axis in axes) or str(row["run_id"])


def line_figure(sweep: SweepFolder, metric: str, label: str, x: str) -> Figure:
    """``metric`` of the finished runs against axis ``x``: one line per value of the others."""
    fig = Figure(figsize=(7.6, 3.4))
    ax = fig.add_subplot()
    levels, numeric = _levels(sweep.table[x]), is_numeric_axis(sweep.table[x])
    others = tuple(axis for axis in sweep.axes if axis != x)
    ok = sweep.ok
    groups = ok.groupby(list(others), sort=False, dropna=False) if others else [((), ok)]
    for _, rows in groups:
        xs = [py_value(v) for v in rows[x]]
        pos = np.array([v if numeric else levels.index(v) for v in xs], dtype=float)
        order = np.argsort(pos, kind="stable")
        ys = rows[metric].to_numpy(dtype=float, na_value=np.nan)[order]
        name = _point_label(rows.iloc[0], others) if others else None
        ax.plot(pos[order], ys, marker="o", linewidth=1.3, markersize=4, label=name)
    ax.set_xticks(levels if numeric else range(len(levels)), [str(v) for v in levels])
    ax.set_xlabel(x)
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.25)
    if others:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def _annotate(ax: Axes, grid: np.ndarray) -> None:
    finite = grid[np.isfinite(grid)]
    middle = (finite.min() + finite.max()) / 2 if finite.size else 0.0
    for (i, j), value in np.ndenumerate(grid):
        text = "—" if np.isnan(value) else f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
        color = "white" if np.isfinite(value) and value < middle else "black"
        ax.text(j, i, text, ha="center", va="center", color=color, fontsize=8)


def heatmap_figure(sweep: SweepFolder, metric: str, label: str, x: str) -> Figure:
    """``metric`` over a two-axis grid (``x`` across, the other axis down), cells annotated.

    A cell without a finished run is blank and annotated ``—``.
    """
    (y,) = [axis for axis in sweep.axes if axis != x]
    xs, ys = _levels(sweep.table[x]), _levels(sweep.table[y])
    grid = np.full((len(ys), len(xs)), np.nan)
    for _, row in sweep.ok.iterrows():
        value = py_value(row[metric])
        if value is not None:
            grid[ys.index(py_value(row[y])), xs.index(py_value(row[x]))] = value
    fig = Figure(figsize=(1.2 * len(xs) + 3.0, 0.55 * len(ys) + 1.6))
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", aspect="auto")
    _annotate(ax, grid)
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    fig.colorbar(image, ax=ax, label=label)
    fig.tight_layout()
    return fig


def pareto_figure(sweep: SweepFolder) -> Figure:
    """Request throughput against p99 TTFT per finished run, the Pareto front highlighted."""
    ok = sweep.ok
    thr = ok[THROUGHPUT].to_numpy(dtype=float, na_value=np.nan)
    lat = ok[LATENCY].to_numpy(dtype=float, na_value=np.nan)
    front = pareto_mask(thr, lat)
    fig = Figure(figsize=(7.6, 3.8))
    ax = fig.add_subplot()
    ax.scatter(lat[~front], thr[~front], color="0.6", s=18, label="dominated")
    order = np.argsort(lat[front], kind="stable")
    ax.plot(lat[front][order], thr[front][order], color="tab:red", marker="o", markersize=5,
            linewidth=1.2, drawstyle="steps-post", label="Pareto front")  # fmt: skip
    for (_, row), x, y in zip(ok[front].iterrows(), lat[front], thr[front], strict=True):
        ax.annotate(_point_label(row, sweep.axes), (x, y), xytext=(4, 4),
                    textcoords="offset points", fontsize=7)  # fmt: skip
    ax.set_xlabel("p99 TTFT (ms)")
    ax.set_ylabel("request throughput (req/s)")
    ax.grid(True, alpha=0.25)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def _has_values(frame: pd.DataFrame, metric: str) -> bool:
    return metric in frame.columns and bool(frame[metric].notna().any())


def sweep_figures(sweep: SweepFolder) -> list[FigureBlock]:
    """Every chart of the report in display order; call inside ``rc_context(REPORT_RC)``.

    Ids: ``fig-sweep-<metric>`` (line charts), ``fig-sweep-heatmap`` (two-axis grids only),
    ``fig-sweep-pareto``. Nothing is drawn without finished runs.
    """
    ok, x = sweep.ok, x_axis(sweep)
    blocks: list[FigureBlock] = []
    if ok.empty:
        return blocks
    others = [axis for axis in sweep.axes if axis != x]
    per_line = f", one line per value of {', '.join(others)}" if others else ""
    for metric, label in CHART_METRICS:
        if x is not None and _has_values(ok, metric):
            fig_id = "fig-sweep-" + metric.replace("_", "-")
            caption = f"{metric} of the finished runs against {x}{per_line}."
            fig = line_figure(sweep, metric, label, x)
            blocks.append(figure_block(fig_id, label, caption, fig))
    if len(sweep.axes) == 2 and x is not None and _has_values(ok, LATENCY):
        caption = f"{LATENCY} per grid cell ({x} across); — marks a cell without a finished run."
        fig = heatmap_figure(sweep, LATENCY, "p99 TTFT (ms)", x)
        blocks.append(figure_block("fig-sweep-heatmap", "p99 TTFT over the grid", caption, fig))
    if _has_values(ok, THROUGHPUT) and _has_values(ok, LATENCY):
        caption = ("Request throughput against p99 TTFT per finished run; red: runs that no other "
                   "run beats on both (higher throughput, lower latency).")  # fmt: skip
        blocks.append(figure_block("fig-sweep-pareto", "Throughput vs p99 TTFT", caption,
                              pareto_figure(sweep)))  # fmt: skip
    return blocks


def runs_table(sweep: SweepFolder) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and rows of the runs table: id, axes, status, key metrics, error (text)."""
    metrics = [m for m in TABLE_METRICS if m in sweep.table.columns]
    header = ["run_id", *sweep.axes, "status", *metrics, "error"]
    rows = []
    for _, row in sweep.table.iterrows():
        cells = [format_value(py_value(row[c])) for c in ("run_id", *sweep.axes, "status")]
        cells += [format_value(py_value(row[m])) for m in metrics]
        error = py_value(row["error"])
        rows.append({"ok": row["status"] == STATUS_OK, "cells": cells, "error": error or ""})
    return header, rows


def render_sweep_report(sweep_dir: Path) -> str:
    """The HTML report of a sweep folder; byte-identical for identical folder contents."""
    sweep = load_sweep_folder(sweep_dir)
    with mpl.rc_context(dict(fg.REPORT_RC)):
        figure_blocks = sweep_figures(sweep)
    header, rows = runs_table(sweep)
    template = report_environment().get_template("sweep.html.j2")
    return template.render(
        name=sweep.name,
        axes=[(axis, ", ".join(str(v) for v in _levels(sweep.table[axis]))) for axis in sweep.axes],
        counts=(len(sweep.table), len(sweep.ok)),
        figures=figure_blocks,
        header=header,
        rows=rows,
    )


def write_sweep_report(sweep_dir: Path) -> Path:
    """Render ``sweep_dir``'s report into ``sweep_dir/report.html``; returns that path."""
    path = sweep_dir / REPORT_FILE
    path.write_text(render_sweep_report(sweep_dir), encoding="utf-8")
    return path
