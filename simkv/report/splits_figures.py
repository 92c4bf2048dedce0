"""The chart of the split-search page: goodput against the prefill:decode split.

Build inside ``matplotlib.rc_context(dict(figures.REPORT_RC))``. One bar per split, in plan
order (the colocated fleets last, hatched), at its goodput per GPU (top panel) and, with prices,
per cost (req/s per $/h, bottom panel, same x). The SLO-passing region is marked: a split whose
rate search found a rate meeting the SLOs stands on a pale green band, one that met none (or
whose run failed) on a grey band with a grey cross at zero; the best split carries a star. The
x labels are ``p:d`` replicas (``p×tpT:d×tpT`` on every bar when some TP degree is not 1), at most
:data:`MAX_LABELS` of them (every k-th beyond that; the table lists them all).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from simkv.report.conventions import (
    Drawn,
    axis_label,
    legend_beside,
    panels_height,
    place_panels,
    tidy_axes,
)

FIGURE_WIDTH_IN = 11.0
PANEL_HEIGHT_IN = 2.6
BOTTOM_IN = 1.1
"""Bottom margin (inches) holding the rotated split labels and the axis label."""
MAX_LABELS = 40
"""Most x labels drawn (rotated 90°, 7 pt: ~0.15 in each across ~8.5 in of panel)."""
MEETS_COLOR, MISSES_COLOR = "#e3f4e1", "#ececec"
DISAGG_COLOR, COLOCATED_COLOR = "tab:blue", "tab:orange"


@dataclass(frozen=True)
class SplitBar:
    """One split as the chart draws it: its label, whether colocated, the goodput per GPU and
    per cost (None: no rate met the SLOs, or no prices) and whether it is the best."""

    label: str
    colocated: bool
    per_gpu: float | None
    per_cost: float | None
    best: bool


def splits_figure(bars: list[SplitBar], currency_unit: str | None) -> Drawn:
    """Goodput per GPU (and, with ``currency_unit``, per cost) against the split (module
    docstring); no figure without a split."""
    if not bars:
        return Drawn(None, ("no split was planned",))
    panels = [("goodput per GPU", "req/s/GPU", [b.per_gpu for b in bars])]
    if currency_unit is not None:
        panels.append(("goodput per cost", f"req/s per {currency_unit}/h",
                       [b.per_cost for b in bars]))  # fmt: skip
    rows = len(panels)
    height = panels_height(rows, PANEL_HEIGHT_IN, shared=True) - 0.5 + BOTTOM_IN
    fig = Figure(figsize=(FIGURE_WIDTH_IN, height))
    axes = place_panels(fig, rows, 1, legend=True, sharex=True, bottom_in=BOTTOM_IN)
    x = np.arange(len(bars))
    for ax, (quantity, unit, values) in zip(axes, panels, strict=True):
        _draw_panel(ax, x, bars, values)
        ax.set_ylabel(axis_label(quantity, unit))
    step = -(-len(bars) // MAX_LABELS)
    axes[-1].set_xticks(x[::step], [b.label for b in bars][::step], rotation=90, fontsize=7)
    axes[-1].set_xlim(-0.6, len(bars) - 0.4)
    axes[-1].set_xlabel(axis_label("split", "prefill:decode replicas"))
    handles = _legend()
    legend_beside(axes[0], handles=handles, labels=[h.get_label() for h in handles])
    notes = () if step == 1 else (f"one split in {step} labelled (the table lists all)",)
    return Drawn(fig, notes)


def _draw_panel(ax: Axes, x: np.ndarray, bars: list[SplitBar], values: list[float | None]) -> None:
    """The SLO bands, the bars, the crosses of the splits meeting none, the best's star."""
    tidy_axes(ax)
    top = max((v for v in values if v is not None), default=0.0)
    for k, (bar, value) in enumerate(zip(bars, values, strict=True)):
        meets = bar.per_gpu is not None
        ax.axvspan(k - 0.5, k + 0.5, color=MEETS_COLOR if meets else MISSES_COLOR, lw=0, zorder=0)
        if value is None:
            ax.scatter([k], [0], marker="x", color="0.55", s=20, zorder=3, clip_on=False)
            continue
        edge = ("black", 1.2) if bar.best else ("white", 0.5)
        ax.bar([k], [value], width=0.7, zorder=2, hatch="//" if bar.colocated else None,
               color=COLOCATED_COLOR if bar.colocated else DISAGG_COLOR,
               edgecolor=edge[0], linewidth=edge[1])  # fmt: skip
        if bar.best:
            ax.scatter([k], [value + 0.06 * top], marker="*", s=90, color="tab:red",
                       edgecolors="black", linewidths=0.6, zorder=4)  # fmt: skip
    ax.set_ylim(0, top * 1.2 if top > 0 else 1.0)
    ax.grid(True, axis="y", alpha=0.25)
    ax.grid(False, axis="x")


def _legend() -> list[Artist]:
    return [
        Patch(facecolor=DISAGG_COLOR, label="P/D split"),
        Patch(facecolor=COLOCATED_COLOR, hatch="//", label="colocated"),
        Patch(facecolor=MEETS_COLOR, edgecolor="0.7", label="meets SLOs"),
        Patch(facecolor=MISSES_COLOR, edgecolor="0.7", label="meets none"),
        Line2D(
            [],
            [],
            marker="*",
            color="tab:red",
            markeredgecolor="black",
            linestyle="",
            markersize=9,
            label="best",
        ),
    ]
