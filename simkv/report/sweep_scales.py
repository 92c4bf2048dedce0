"""The sweep report's axes, by the report conventions (:mod:`simkv.report.conventions`):
zero baselines or log scales, log2 grids, compact tick labels, thinned x tick labels.

* a y axis starts at zero, unless a linear axis would squash its values (convention 7,
  :func:`~simkv.report.conventions.squashed`): then it is logarithmic (``symlog`` when some
  values are 0) and its label says so; a log axis over two decades or less is labelled at
  1, 2 and 5 times each power of ten, so the squashed points still have labels beside them;
* a numeric grid axis whose values are all the smallest times a power of two (block sizes,
  capacities 12/24/48) is drawn on a log2 scale;
* tick labels are the conventions' compact numbers (``1.4M``, ``950``, ``0.25``): no offset,
  no exponent, no mathtext (the report draws none);
* a numeric x axis that is not log2 has round-number ticks plus one at each answer (a knee,
  a capacity), labelled as the summary prints it (convention 8: :func:`answer_ticks`);
* an x tick label that would touch the previous one is left blank (the tick stays); an
  answer's label is kept, and its neighbours blanked instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.ticker import LogLocator, MaxNLocator, NullFormatter

from simkv.report.conventions import COMPACT, LOG_DECADES, MAX_TICKS, compact_number, squashed


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


def compact_log_ticks(axis: Axis) -> None:
    """Label a log axis's decades with compact numbers (the report draws no mathtext), no
    minor labels."""
    axis.set_major_formatter(COMPACT)
    axis.set_minor_formatter(NullFormatter())


def scale_y(ax: Axes, values: np.ndarray) -> str:
    """Set the y scale for ``values`` (NaN ignored); returns the label suffix for the scale."""
    finite = values[np.isfinite(values)]
    positive = finite[finite > 0]
    if squashed(finite) and finite.min() >= 0:
        if finite.min() == 0:
            ax.set_yscale("symlog", linthresh=float(positive.min()), linscale=0.5)
            ax.set_ylim(0, positive.max() * 2)
            compact_log_ticks(ax.yaxis)
            return " (symlog scale)"
        ax.set_yscale("log")
        if positive.max() / positive.min() <= 10**LOG_DECADES:  # few decades: label 1-2-5
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        compact_log_ticks(ax.yaxis)
        ax.set_ylim(positive.min() / 1.6, positive.max() * 1.6)
        return " (log scale)"
    top = finite.max() if finite.size else 0.0
    ax.set_ylim(min(0.0, finite.min() if finite.size else 0.0), top * 1.08 if top > 0 else 1.0)
    ax.yaxis.set_major_formatter(COMPACT)
    return ""


TICK_GAP_PX = 4.0
"""Least gap between two x tick labels; a label closer to the previous one is left blank."""


AXIS_PAD = 0.05
"""Matplotlib's default data margin (``axes.xmargin``): share of the span left beside the
points."""


def answer_ticks(ax: Axes, low: float, high: float, answers: dict[float, str]) -> None:
    """Convention 8 on a linear x axis over [low, high]: at most
    :data:`~simkv.report.conventions.MAX_TICKS` round-number ticks in compact labels, plus a
    tick at each answer labelled with its text (``answers``: position → label)."""
    pad = AXIS_PAD * (high - low)  # matplotlib's own margin: a round tick there is in view
    rounds = MaxNLocator(nbins=MAX_TICKS - 1, steps=[1, 2, 2.5, 5, 10]).tick_values(low, high)
    ticks = {float(t): compact_number(float(t)) for t in rounds if low - pad <= t <= high + pad}
    ticks.update(answers)
    ax.set_xticks(sorted(ticks), [ticks[t] for t in sorted(ticks)])


def thin_x_labels(ax: Axes, keep: tuple[float, ...] = ()) -> None:
    """Blank every x tick label that would come within :data:`TICK_GAP_PX` of a label kept
    (the tick stays): the labels of the ticks at ``keep`` (answers) first, then the others
    left to right. Call once the layout is final."""
    fig = ax.get_figure()
    if fig is None:
        return
    renderer = FigureCanvasAgg(fig).get_renderer()
    ticks, labels = ax.get_xticks(), [t.get_text() for t in ax.get_xticklabels()]
    prop = ax.get_xticklabels()[0].get_fontproperties() if labels else None
    spans = []
    for tick, text in zip(ticks, labels, strict=True):
        width = renderer.get_text_width_height_descent(text, prop, ismath=False)[0]
        centre = ax.transData.transform((tick, 0.0))[0]
        spans.append((centre - width / 2, centre + width / 2))
    order = sorted(range(len(ticks)), key=lambda i: (ticks[i] not in keep, ticks[i]))
    taken: list[tuple[float, float]] = []
    kept = [""] * len(ticks)
    for i in order:
        left, right = spans[i]
        if all(left >= end + TICK_GAP_PX or right + TICK_GAP_PX <= start for start, end in taken):
            kept[i] = labels[i]
            taken.append(spans[i])
    ax.set_xticks(ticks, kept)
