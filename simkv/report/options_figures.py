"""The chart of the GPU-options page: each option's fleet at its answer, cost per hour against
p99 TTFT (left panel) and p99 TPOT (right).

Build inside ``matplotlib.rc_context(dict(figures.REPORT_RC))``. Conventions
(:mod:`simkv.report.conventions`): the x axis names the currency (``cost per hour ($/h)``),
panels in fixed margins with the legend beside them, y from zero (log past
:data:`~simkv.report.conventions.LOG_DECADES` decades), SLO limits as dashed red lines. Pareto
options are red, the others grey; the cheapest is a star; every point carries its option's
name, placed by :func:`simkv.report.label_layout.place_point_labels` (a name with no free place
is left out and listed in the figure's notes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, MaxNLocator

from simkv.report.conventions import (
    LOG_DECADES,
    MAX_TICKS,
    Drawn,
    axis_label,
    legend_beside,
    money_unit,
    panels_height,
    place_panels,
    slo_hline,
    tidy_axes,
)
from simkv.report.label_layout import place_point_labels
from simkv.report.sweep_scales import compact_log_ticks

PANELS = (("p99_ttft_ms", "ttft_ms", "p99 TTFT"), ("p99_tpot_ms", "tpot_ms", "p99 TPOT"))
"""(row key, ``slo:`` key, name) of each panel, left to right."""
FIGURE_WIDTH_IN = 11.0
PANEL_HEIGHT_IN = 3.0


@dataclass(frozen=True)
class OptionPoint:
    """One answered option as the chart draws it."""

    name: str
    cost_per_hour: float
    p99_ms: Mapping[str, float | None]
    pareto: bool
    cheapest: bool


def options_figure(
    points: list[OptionPoint], currency: str, slo: Mapping[str, float | None]
) -> Drawn:
    """Cost per hour against p99 TTFT and p99 TPOT, one point per answered option (module
    docstring); no figure without an answered option."""
    if not points:
        return Drawn(None, ("no option meets the SLOs: no fleet to chart",))
    fig = Figure(figsize=(FIGURE_WIDTH_IN, panels_height(1, PANEL_HEIGHT_IN, shared=False)))
    axes = place_panels(fig, 1, 2, legend=True, sharex=False)
    cost = np.array([p.cost_per_hour for p in points])
    unplaced: list[str] = []
    for ax, (metric, key, name) in zip(axes, PANELS, strict=True):
        values = np.array([_value(p.p99_ms.get(metric)) for p in points])
        limit = slo.get(key)
        _draw_panel(ax, cost, values, points, limit, name)
        ax.set_xlabel(axis_label("cost per hour", f"{money_unit(currency)}/h"))
        ax.set_ylabel(axis_label(name, "ms"))
        ax.set_title(f"{name} against cost")
        ax.set_xlim(ax.get_xlim())  # labels are placed in these limits: no autoscaling after
        ax.set_ylim(ax.get_ylim())
        ok = np.isfinite(values)
        xy = np.column_stack([cost[ok], values[ok]])
        names = [p.name for p, good in zip(points, ok, strict=True) if good]
        missed = place_point_labels(ax, xy, names, fontsize=7, color="0.15")
        unplaced += [f"{name}: {label}" for label in missed]
    _one_legend(axes)
    notes = () if not unplaced else ("too close to label apart (see the table): "
                                     + "; ".join(unplaced),)  # fmt: skip
    return Drawn(fig, notes)


def _one_legend(axes: list[Axes]) -> None:
    """One legend beside the last panel: every panel's entries, each name once (both SLOs)."""
    entries: dict[str, object] = {}
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels, strict=True):
            entries.setdefault(label, handle)
    legend_beside(axes[-1], handles=list(entries.values()), labels=list(entries))


def _value(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def _draw_panel(
    ax: Axes, cost: np.ndarray, values: np.ndarray, points: list[OptionPoint],
    limit: float | None, name: str,
) -> None:  # fmt: skip
    """The points (Pareto red, others grey, the cheapest a star) and the SLO line."""
    front = np.array([p.pareto for p in points])
    best = np.array([p.cheapest for p in points])
    shown = [v for v in [*values[np.isfinite(values)], limit or np.nan] if np.isfinite(v)]
    log = bool(shown) and min(shown) > 0 and max(shown) / min(shown) > 10**LOG_DECADES
    if log:
        ax.set_yscale("log")
    tidy_axes(ax, zero_y=not log)
    if log:  # tidy_axes ticks a linear y: decades instead
        ax.yaxis.set_major_locator(LogLocator(base=10, numticks=MAX_TICKS))
        compact_log_ticks(ax.yaxis)
    ax.set_xlim(0, float(cost.max()) * 1.25)
    if (~front).any():
        ax.scatter(cost[~front], values[~front], color="0.6", s=22, label="dominated", zorder=3)
    if front.any():
        ax.scatter(cost[front], values[front], color="tab:red", s=22, label="Pareto front",
                   zorder=3)  # fmt: skip
    if best.any():
        ax.scatter(cost[best], values[best], marker="*", color="tab:red", edgecolors="black",
                   s=90, linewidths=0.6, label="cheapest", zorder=4)  # fmt: skip
    if limit:
        slo_hline(ax, float(limit), f"{name.split()[-1]} SLO ≤ {limit:,g} ms")
    top = max(shown) if shown else 1.0
    if not log:
        ax.set_ylim(0, top * 1.2)


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
"""One marker per option (then repeated), so lines stay apart without colour."""


@dataclass(frozen=True)
class OptionCurve:
    """One option's answers against target rate: rates (req/s), GPUs and cost per hour at
    each (None where no count searched meets the SLOs)."""

    name: str
    rates: tuple[float, ...]
    gpus: tuple[int | None, ...]
    costs: tuple[float | None, ...]


def curve_figure(curves: list[OptionCurve], currency: str | None) -> Drawn:
    """GPUs against target rate (and, with a ``currency``, cost per hour below), one line per
    option; a rate where an option has no answer is a gap in its line. Options often need the
    same GPUs, so each line is drawn wider, with larger markers, than the ones after it and
    below them: coinciding lines stay visible as nested strokes."""
    panels = [("GPUs needed", "GPUs", lambda c: c.gpus)]
    if currency is not None:
        unit = f"{money_unit(currency)}/h"
        panels.append(("cost per hour", unit, lambda c: c.costs))
    if not any(g is not None for c in curves for g in c.gpus):
        return Drawn(None, ("no rate has an answer: no curve to draw",))
    rows = len(panels)
    fig = Figure(figsize=(FIGURE_WIDTH_IN * 0.8, panels_height(rows, 2.6, shared=True)))
    axes = place_panels(fig, rows, 1, legend=True, sharex=True)
    rates = sorted({rate for curve in curves for rate in curve.rates})
    for ax, (quantity, unit_name, values) in zip(axes, panels, strict=True):
        top = 0.0
        for k, curve in enumerate(curves):
            ys = np.array([np.nan if v is None else float(v) for v in values(curve)])
            under = len(curves) - 1 - k  # earlier lines wider and larger, below the later
            ax.plot(curve.rates, ys, marker=MARKERS[k % len(MARKERS)], markersize=5 + 2.5 * under,
                    linewidth=1.2 + 1.6 * under, label=curve.name, zorder=2 + k)  # fmt: skip
            top = max(top, float(np.nanmax(ys)) if np.isfinite(ys).any() else 0.0)
        tidy_axes(ax)
        if unit_name == "GPUs":
            ax.yaxis.set_major_locator(MaxNLocator(nbins=MAX_TICKS - 1, integer=True))
        ax.set_ylabel(axis_label(quantity, unit_name))
        ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
        ax.set_xlim(0, rates[-1] * 1.08)
    if len(rates) <= MAX_TICKS:  # a tick at every target rate searched
        axes[-1].set_xticks(rates)
    axes[-1].set_xlabel(axis_label("target rate", "req/s"))
    legend_beside(axes[0])
    return Drawn(fig)
