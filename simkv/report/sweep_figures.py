"""Figures of the sweep report: metric-vs-axis lines, the grid heatmap, the Pareto scatter.

Build them inside ``matplotlib.rc_context(dict(figures.REPORT_RC))`` (byte-stable SVG).
Conventions, so that a chart cannot mislead:

* y axes start at zero, unless the values (SLO lines included) span more than
  :data:`LOG_DECADES` decades: then the axis is logarithmic (``symlog`` when some values are 0)
  and its label says so;
* a numeric x axis whose values are all the smallest one times a power of two (block sizes,
  capacities 12/24/48) is drawn on a log2 scale, ticks at the values;
* every line has its own marker and line style; a line equal to an earlier one (same x, same y)
  is drawn hollow, shifted by :data:`DODGE` of the x span per earlier twin, and its legend entry
  says ``= <twin>``;
* SLO values are horizontal dashed red lines, a rate sweep's knee a vertical dotted line, both
  named in the legend (never as free text, which could collide);
* Pareto points carry their run numbers, placed by :mod:`simkv.report.label_layout` so that no
  two labels overlap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter, NullLocator

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

THROUGHPUT = "request_throughput"
LATENCY = "p99_ttft_ms"
LOG_DECADES = 2.0
"""Issue 16: an axis whose values span more than two decades (a 2.3e6 ms outlier among
hundreds of ms) is drawn on a log scale; below that, a linear axis from zero."""
DODGE = 0.012
"""Shift of a line equal to an earlier one, as a fraction of the x span (a marker's width)."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
LINESTYLES = ("-", "--", "-.", ":")
SLO_STYLE = {"color": "tab:red", "linestyle": (0, (5, 3)), "linewidth": 1.0}
KNEE_STYLE = {"color": "0.25", "linestyle": ":", "linewidth": 1.3}
LEGEND_KW: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "frameon": False}


@dataclass(frozen=True)
class Marks:
    """Reference lines of a line chart: SLO values (y, ms) and knees (legend text, x)."""

    slo: tuple[float, ...] = ()
    knees: tuple[tuple[str, float], ...] = ()


def is_power_of_two_grid(values: Sequence[Any]) -> bool:
    """At least three positive numbers, each the smallest times 2^k (k a whole number)."""
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    if len(values) < 3 or not numbers:
        return False
    low = min(values)
    if low <= 0:
        return False
    ratios = [math.log2(v / low) for v in values]
    return all(abs(r - round(r)) < 1e-9 for r in ratios)


def _plain(value: float, _pos: object = None) -> str:
    return f"{value:,.0f}" if abs(value) >= 1 else f"{value:g}"


def plain_log_ticks(axis: Axis) -> None:
    """Label a log axis's decades as plain numbers (the report draws no mathtext), no minors."""
    axis.set_major_formatter(FuncFormatter(_plain))
    axis.set_minor_formatter(NullFormatter())


def scale_y(ax: Axes, values: np.ndarray) -> str:
    """Set the y scale for ``values`` (NaN ignored); returns the label suffix for the scale."""
    finite = values[np.isfinite(values)]
    positive = finite[finite > 0]
    wide = positive.size > 1 and positive.max() / positive.min() > 10**LOG_DECADES
    if wide and finite.min() >= 0:
        if finite.min() == 0:
            ax.set_yscale("symlog", linthresh=float(positive.min()), linscale=0.5)
            ax.set_ylim(0, positive.max() * 2)
            plain_log_ticks(ax.yaxis)
            return " (symlog scale)"
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
        ax.set_ylim(positive.min() / 1.6, positive.max() * 1.6)
        return " (log scale)"
    top = finite.max() if finite.size else 0.0
    ax.set_ylim(min(0.0, finite.min() if finite.size else 0.0), top * 1.08 if top > 0 else 1.0)
    return ""


def _lines(ok: pd.DataFrame, metric: str, x: str, xs: list[Any], others: list[str]
           ) -> list[tuple[str | None, np.ndarray, np.ndarray]]:  # fmt: skip
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


def _twin(lines: list[tuple[str | None, np.ndarray, np.ndarray]], i: int) -> tuple[int, str | None]:
    """How many earlier lines equal line ``i``, and the name of the first of them."""
    _, x, y = lines[i]
    twins = [
        name
        for name, x2, y2 in lines[:i]
        if np.array_equal(x2, x) and np.allclose(y2, y, equal_nan=True)
    ]
    return len(twins), (twins[0] if twins else None)


def _dodged(x: np.ndarray, rank: int, xs: list[Any], log2: bool, numeric: bool) -> np.ndarray:
    if rank == 0:
        return x
    if log2:
        return x * 2 ** (DODGE * rank * math.log2(max(xs) / min(xs)))
    span = (max(xs) - min(xs)) if numeric and len(xs) > 1 else max(len(xs) - 1, 1)
    return x + DODGE * rank * span


TICK_GAP_PX = 4.0
"""Least gap between two x tick labels; a label closer to the previous one is left blank."""


def thin_x_labels(ax: Axes) -> None:
    """Blank every x tick label that would come within :data:`TICK_GAP_PX` of the last label
    kept (left to right; the tick stays). Call once the layout is final."""
    fig = ax.get_figure()
    if fig is None:
        return
    renderer = FigureCanvasAgg(fig).get_renderer()
    ticks, labels = ax.get_xticks(), [t.get_text() for t in ax.get_xticklabels()]
    prop = ax.get_xticklabels()[0].get_fontproperties() if labels else None
    right = -np.inf
    kept = []
    for tick, text in zip(ticks, labels, strict=True):
        width = renderer.get_text_width_height_descent(text, prop, ismath=False)[0]
        centre = ax.transData.transform((tick, 0.0))[0]
        fits = centre - width / 2 >= right + TICK_GAP_PX
        kept.append(text if fits else "")
        right = centre + width / 2 if fits else right
    ax.set_xticks(ticks, kept)


def _set_x(ax: Axes, x: str, xs: list[Any], numeric: bool) -> bool:
    log2 = numeric and is_power_of_two_grid(xs)
    if log2:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(xs if numeric else range(len(xs)), [axis_value(v) for v in xs])
    ax.set_xlabel(x + (" (log2 scale)" if log2 else ""))
    return log2


def line_figure(
    sweep: SweepFolder, metric: str, label: str, x: str, marks: Marks = Marks()
) -> Figure:
    """``metric`` of the finished runs against axis ``x``: one line per value of the others."""
    fig = Figure(figsize=(7.6, 3.4))
    ax = fig.add_subplot()
    xs, numeric = levels(sweep.table[x]), is_numeric_axis(sweep.table[x])
    others = [axis for axis in sweep.axes if axis != x]
    log2 = _set_x(ax, x, xs, numeric)
    lines = _lines(sweep.ok, metric, x, xs, others)
    for i, (name, pos, ys) in enumerate(lines):
        rank, twin = _twin(lines, i)
        shown = name if twin is None else f"{name} (= {twin})"
        ax.plot(_dodged(pos, rank, xs, log2, numeric), ys, marker=MARKERS[i % len(MARKERS)],
                linestyle=LINESTYLES[i % len(LINESTYLES)], linewidth=1.3, markersize=5 + rank,
                markerfacecolor="none" if rank else None, label=shown)  # fmt: skip
    for value in marks.slo:
        ax.axhline(value, label=f"SLO {value:,g} ms", **SLO_STYLE)
    for text, at in marks.knees:
        ax.axvline(at, label=text, **KNEE_STYLE)
    values = np.concatenate([ys for _, _, ys in lines] + [np.array(marks.slo, dtype=float)])
    ax.set_ylabel(label + scale_y(ax, values))
    ax.grid(True, alpha=0.25)
    if others or marks.slo or marks.knees:
        ax.legend(title=", ".join(others) or None, **LEGEND_KW)
    fig.tight_layout()
    thin_x_labels(ax)
    return fig


def _annotate(ax: Axes, grid: np.ndarray, norm: Normalize) -> None:
    for (i, j), value in np.ndenumerate(grid):
        text = "—" if np.isnan(value) else f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
        color = "white" if np.isfinite(value) and norm(value) < 0.5 else "black"
        ax.text(j, i, text, ha="center", va="center", color=color, fontsize=8)


def _norm(grid: np.ndarray) -> Normalize:
    finite = grid[np.isfinite(grid)]
    low, high = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    if low > 0 and high / low > 10**LOG_DECADES:
        return LogNorm(low, high)
    return Normalize(low, high)


def heatmap_figure(sweep: SweepFolder, metric: str, label: str, x: str) -> Figure:
    """``metric`` over a two-axis grid (``x`` across, the other axis down), cells annotated.

    A cell without a finished run is blank and annotated ``—``; the colour scale is
    logarithmic when the values span more than :data:`LOG_DECADES` decades.
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
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    scale = " (log scale)" if isinstance(norm, LogNorm) else ""
    fig.colorbar(image, ax=ax, label=label + scale)
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
    logarithmic when p99 TTFT spans more than :data:`LOG_DECADES` decades.
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
    positive = lat[np.isfinite(lat) & (lat > 0)]
    if positive.size > 1 and positive.max() / positive.min() > 10**LOG_DECADES:
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
        return " (log scale)"
    ax.set_xlim(left=0)
    return ""
