"""Figures of the sweep report: metric-vs-axis lines, the grid heatmap, the Pareto scatter.

Build them inside ``matplotlib.rc_context(dict(figures.REPORT_RC))`` (byte-stable SVG).
Conventions, so that a chart cannot mislead (axes: :mod:`simkv.report.sweep_scales`):

* y axes start at zero unless a linear axis would squash the values (SLO lines included;
  conventions 7): then log scale; power-of-two grid axes are log2, other numeric axes have
  round ticks plus a labelled tick at each knee or capacity (conventions 8); the latency axis
  of the Pareto scatter and the heatmap's colours follow the same squash rule;
* every line has its own marker and line style; a line that would hide an earlier one (same x,
  y within :data:`COINCIDE` of the axis height) is drawn hollow, shifted by :data:`DODGE` of
  the x span per earlier twin, and its legend entry says ``= <twin>`` (equal values) or
  ``≈ <twin>``;
* SLO values are the conventions' dashed red lines (horizontal here), a rate sweep's knee a
  vertical dotted line, both named in the legend (never as free text, which could collide);
* Pareto points carry their run numbers, placed by :mod:`simkv.report.label_layout` so that no
  two labels overlap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from simkv.report.conventions import COMPACT, axis_label, slo_hline, squashed
from simkv.report.label_layout import place_point_labels
from simkv.report.sweep_folder import (
    SweepFolder,
    axis_value,
    is_numeric_axis,
    levels,
    point_label,
    py_value,
    run_number,
)
from simkv.report.sweep_scales import (
    answer_ticks,
    compact_log_ticks,
    is_power_of_two_grid,
    scale_y,
    thin_x_labels,
)
from simkv.report.sweep_summary import THROUGHPUT

LATENCY = "p99_ttft_ms"
"""The latency the Pareto scatter and the heatmap show."""
DODGE = 0.012
"""Shift of a line that hides an earlier one, as a fraction of the x span (a marker's width)."""
COINCIDE = 0.01
"""Lines whose points are this close (fraction of the axis height, about 2 px) hide each other."""
EQUAL_RTOL = 1e-9
"""Relative difference below which two lines' values are called equal (``=`` in the legend)."""
AXIS_UNITS: dict[str, str] = {
    "workload.rate": "req/s",
    "workload.arrival.rate": "req/s",
    "workload.time_scale": "×",
    "kv_cache.block_size": "tokens",
    "kv_cache.capacity_gib": "GiB",
    "kv_cache.num_blocks": "blocks",
    "kv_cache.swap_space_gib": "GiB",
    "kv_cache.gpu_memory_utilization": "fraction",
    "scheduler.max_num_seqs": "requests",
    "scheduler.max_num_batched_tokens": "tokens",
    "scheduler.long_prefill_token_threshold": "tokens",
    "parallel.tensor_parallel": "GPUs",
    "fleet.replicas.0.count": "replicas",
}
"""Units of the sweep axes users vary most (the figure convention: every axis names its unit,
:func:`simkv.report.conventions.axis_label`); other axes are named by their key alone."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
LINESTYLES = ("-", "--", "-.", ":")
KNEE_STYLE = {"color": "0.25", "linestyle": ":", "linewidth": 1.3}
LEGEND_KW: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "frameon": False}


@dataclass(frozen=True)
class Marks:
    """Reference lines of a line chart: SLO values (y, ms) and knees (legend text, x)."""

    slo: tuple[float, ...] = ()
    knees: tuple[tuple[str, float], ...] = ()


Line = tuple[str | None, np.ndarray, np.ndarray]
"""A line of a chart: its legend name, x positions, y values."""


def axis_title(key: str) -> str:
    """A sweep axis's label: its key path, with its unit when :data:`AXIS_UNITS` knows it."""
    unit = AXIS_UNITS.get(key)
    return key if unit is None else axis_label(key, unit)


def _lines(ok: pd.DataFrame, metric: str, x: str, xs: list[Any], others: list[str]) -> list[Line]:
    """(name, x positions, y values) per value of the other axes, sorted by x."""
    numeric = is_numeric_axis(ok[x])
    groups = ok.groupby(others, sort=False, dropna=False) if others else [((), ok)]
    out = []
    for _, rows in groups:
        values = [py_value(v) for v in rows[x]]
        pos = np.array([v if numeric else xs.index(v) for v in values], dtype=float)
        order = np.argsort(pos, kind="stable")
        ys = rows[metric].to_numpy(dtype=float, na_value=np.nan)[order]
        name = point_label(rows.iloc[0], others, keys=False) if others else None
        out.append((name, pos[order], ys))
    return out


def _twin(ax: Axes, lines: list[Line], i: int) -> tuple[int, str]:
    """How many earlier lines line ``i`` hides or is hidden by (same x values, y within
    :data:`COINCIDE` of the axis height at each), and its legend note: ``= a`` when equal to
    line ``a`` (to :data:`EQUAL_RTOL`), ``≈ a`` when only that close, else empty. Call once
    the y limits are set."""
    to_axes = ax.transScale + ax.transLimits

    def height(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return to_axes.transform(np.column_stack([x, y]))[:, 1]

    _, x, y = lines[i]
    twins = []
    for name, x2, y2 in lines[:i]:
        if np.array_equal(x2, x) and np.allclose(height(x, y), height(x2, y2), rtol=0,
                                                 atol=COINCIDE, equal_nan=True):  # fmt: skip
            equal = np.allclose(y, y2, rtol=EQUAL_RTOL, atol=0, equal_nan=True)
            twins.append(f"{'=' if equal else '≈'} {name}")
    return len(twins), (twins[0] if twins else "")


def _dodged(x: np.ndarray, rank: int, xs: list[Any], log2: bool, numeric: bool) -> np.ndarray:
    if rank == 0:
        return x
    if log2:
        return x * 2 ** (DODGE * rank * math.log2(max(xs) / min(xs)))
    span = (max(xs) - min(xs)) if numeric and len(xs) > 1 else max(len(xs) - 1, 1)
    return x + DODGE * rank * span


def _set_x(ax: Axes, x: str, xs: list[Any], numeric: bool, answers: tuple[float, ...]) -> bool:
    """The x axis: a tick per grid value (log2 and categorical axes), or round ticks plus one
    at each answer (other numeric axes, conventions 8). Returns whether it is log2."""
    log2 = numeric and is_power_of_two_grid(xs)
    if log2:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
    if numeric and not log2:
        answer_ticks(ax, float(min(xs)), float(max(xs)), {a: axis_value(a) for a in answers})
    else:
        ax.set_xticks(xs if numeric else range(len(xs)), [axis_value(v) for v in xs])
    ax.set_xlabel(axis_title(x) + (" (log2 scale)" if log2 else ""))
    return log2


def line_figure(
    sweep: SweepFolder, metric: str, label: str, x: str, marks: Marks = Marks()
) -> Figure:
    """``metric`` of the finished runs against axis ``x``: one line per value of the others."""
    fig = Figure(figsize=(7.6, 3.4))
    ax = fig.add_subplot()
    xs, numeric = levels(sweep.table[x]), is_numeric_axis(sweep.table[x])
    others = [axis for axis in sweep.axes if axis != x]
    answers = tuple(at for _, at in marks.knees)
    log2 = _set_x(ax, x, xs, numeric, answers)
    lines = _lines(sweep.ok, metric, x, xs, others)
    values = np.concatenate([ys for _, _, ys in lines] + [np.array(marks.slo, dtype=float)])
    ax.set_ylabel(label + scale_y(ax, values))
    for i, (name, pos, ys) in enumerate(lines):
        rank, twin = _twin(ax, lines, i)
        shown = f"{name} ({twin})" if twin else name
        ax.plot(_dodged(pos, rank, xs, log2, numeric), ys, marker=MARKERS[i % len(MARKERS)],
                linestyle=LINESTYLES[i % len(LINESTYLES)], linewidth=1.3, markersize=5 + rank,
                markerfacecolor="none" if rank else None, label=shown)  # fmt: skip
    for value in marks.slo:
        slo_hline(ax, value, f"SLO {value:,g} ms")
    for text, at in marks.knees:
        ax.axvline(at, label=text, **KNEE_STYLE)
    ax.grid(True, alpha=0.25)
    if others or marks.slo or marks.knees:
        ax.legend(title=", ".join(others) or None, **LEGEND_KW)
    fig.tight_layout()
    thin_x_labels(ax, answers)
    return fig


def _annotate(ax: Axes, grid: np.ndarray, norm: Normalize) -> None:
    for (i, j), value in np.ndenumerate(grid):
        text = "—" if np.isnan(value) else f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
        color = "white" if np.isfinite(value) and norm(value) < 0.5 else "black"
        ax.text(j, i, text, ha="center", va="center", color=color, fontsize=8)


def _norm(grid: np.ndarray) -> Normalize:
    finite = grid[np.isfinite(grid)]
    low, high = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    if low > 0 and squashed(finite):
        return LogNorm(low, high)
    return Normalize(low, high)


def heatmap_figure(sweep: SweepFolder, metric: str, label: str, x: str) -> Figure:
    """``metric`` over a two-axis grid (``x`` across, the other axis down), cells annotated.

    A cell without a finished run is blank and annotated ``—``; the colour scale is
    logarithmic when linear colours would squash the values (conventions 7).
    """
    (y,) = [axis for axis in sweep.axes if axis != x]
    xs, ys = levels(sweep.table[x]), levels(sweep.table[y])
    grid = np.full((len(ys), len(xs)), np.nan)
    for _, row in sweep.ok.iterrows():
        value = py_value(row[metric])
        if value is not None:
            grid[ys.index(py_value(row[y])), xs.index(py_value(row[x]))] = value
    fig = Figure(figsize=(1.2 * len(xs) + 3.0, 0.55 * len(ys) + 1.6))
    ax = fig.add_subplot()
    norm = _norm(grid)
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", aspect="auto", norm=norm)
    _annotate(ax, grid, norm)
    ax.set_xticks(range(len(xs)), [axis_value(v) for v in xs])
    ax.set_yticks(range(len(ys)), [axis_value(v) for v in ys])
    ax.set_xlabel(axis_title(x))
    ax.set_ylabel(axis_title(y))
    scale = " (log scale)" if isinstance(norm, LogNorm) else ""
    bar = fig.colorbar(image, ax=ax, label=label + scale)
    if isinstance(norm, LogNorm):
        compact_log_ticks(bar.ax.yaxis)
    else:
        bar.ax.yaxis.set_major_formatter(COMPACT)
    fig.tight_layout()
    return fig


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


@dataclass(frozen=True)
class Pareto:
    """The Pareto scatter: figure, run numbers on the front, run numbers left unlabelled."""

    figure: Figure
    front: tuple[int, ...]
    unlabelled: tuple[str, ...]


def pareto_figure(sweep: SweepFolder) -> Pareto:
    """Request throughput against p99 TTFT per finished run, the Pareto front highlighted.

    Each point is labelled with its run number (front points placed first); the x axis is
    logarithmic when a linear one would squash p99 TTFT (conventions 7).
    """
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
    ax.set_xlabel("p99 TTFT (ms)" + _scale_x_latency(ax, lat))
    ax.set_ylabel("request throughput (req/s)")
    ax.yaxis.set_major_formatter(COMPACT)
    top = np.nanmax(thr) if np.isfinite(thr).any() else 1.0
    ax.set_ylim(0, top * 1.12 if top > 0 else 1.0)
    ax.grid(True, alpha=0.25)
    ax.legend(**LEGEND_KW)
    fig.tight_layout()
    ax.set_xlim(ax.get_xlim())  # labels are placed in these limits: no autoscaling after
    numbers = np.array([run_number(i) for i in ok.index])
    valid = np.isfinite(thr) & np.isfinite(lat)
    first = np.argsort(~front[valid], kind="stable")  # front points get the first places
    xy = np.column_stack([lat[valid], thr[valid]])[first]
    texts = [str(n) for n in numbers[valid][first]]
    unlabelled = place_point_labels(ax, xy, texts, fontsize=7, color="0.15")
    return Pareto(fig, tuple(int(n) for n in numbers[front]), tuple(unlabelled))


def _scale_x_latency(ax: Axes, lat: np.ndarray) -> str:
    if squashed(lat):
        ax.set_xscale("log")
        compact_log_ticks(ax.xaxis)
        return " (log scale)"
    ax.set_xlim(left=0)
    ax.xaxis.set_major_formatter(COMPACT)
    return ""
