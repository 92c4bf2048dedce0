"""The figure conventions of simkv's reports, written once; every report figure follows them.

1. **Units in axis labels**: :func:`axis_label` (``"TTFT (ms)"``); a number on an axis is in
   the unit its label names, never scaled by a hidden ``1e6`` offset.
2. **Short tick labels, few ticks**: :func:`tidy_axes` gives every axis at most
   :data:`MAX_TICKS` major ticks (a ``MaxNLocator``, or decades on a log axis, no minor labels)
   labelled by :func:`compact_number` (at most 6 characters: ``950``, ``1.2k``, ``15k``,
   ``1.5M``). With a figure at least :data:`MIN_PANEL_WIDTH_IN` wide per panel and the report
   font, neighbouring labels cannot touch; :func:`text_overlaps` checks it (the tests call it
   on every figure, and the browser tests measure the page).
3. **Zero baselines**: a linear y axis starts at 0 (:func:`tidy_axes`); a log axis does not.
   An axis whose values span more than :data:`LOG_DECADES` decades is logarithmic, and its
   label says so (the sweep report's axes, :mod:`simkv.report.sweep_scales`).
4. **Fixed margins, no layout search**: :func:`place_panels` puts panels in fixed margins (in
   inches) sized for compact labels; legends go in the right margin, so no text moves after
   the data is drawn, and no second drawing pass is needed to lay a figure out.
5. **No empty panels**: a panel with nothing to show is not drawn; the figure's
   :class:`Drawn` carries one line of text saying so ("no preemptions in this run").
6. **SLO lines**: a configured objective is a dashed red line in :data:`SLO_STYLE`, named in
   the legend: vertical on a latency axis (:func:`slo_line`), horizontal on a metric-vs-axis
   chart (:func:`slo_hline`).
7. **Outliers never squash the others**: a value axis is logarithmic when a linear one would
   crowd most points into its bottom :data:`SQUASH_FRACTION` (:func:`squashed`: the values
   span more than :data:`LOG_DECADES` decades, or their median is below that fraction of
   their maximum: a static policy's 1,368 ms among 17–41 ms and a 100 ms SLO). No value is
   clipped, so no run is ever off the chart.
8. **Answers on the axis**: a rate axis carrying an answer (a capacity, a knee) has a tick at
   it, labelled with the answer as the summary prints it; other labels that would touch it
   are blanked. Its other ticks are round numbers (:data:`MAX_TICKS` at most), not one per
   point, so a search's points clustered near its answer do not crowd the labels.
9. **Tables never break words**: cells and headers wrap at spaces only (no ``break-all``,
   no ``overflow-wrap: anywhere``, no soft hyphens), and a duration is printed by
   :func:`format_ms`: milliseconds below :data:`SECONDS_FROM_MS`, seconds from there, so no
   cell reads ``1,609,216 ms``.
10. **Legends never cover data**: a legend sits beside its panel (:func:`legend_beside`) or
   above the panels, never inside a plotting area; :func:`legend_overlaps` checks it (the
   browser tests measure every legend against every plotted line).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullLocator
from matplotlib.transforms import Bbox

MAX_TICKS = 6
"""Most major ticks on one axis."""
MIN_PANEL_WIDTH_IN = 4.0
"""Narrowest panel (inches) :data:`MAX_TICKS` compact labels are drawn in without touching."""
MARGINS_IN = {"left": 0.75, "bottom": 0.5, "top": 0.3, "gap_x": 0.85, "gap_y": 0.85}
"""Fixed panel margins (inches): room for compact tick labels plus an axis label (and, between
rows, a panel title); rows sharing a time axis have no labels between them, only
``gap_y_shared``."""
GAP_Y_SHARED_IN = 0.22
LEGEND_MARGIN_IN = 1.75
"""Right margin (inches) of a figure whose legends sit beside its panels."""
CHAR_WIDTH_IN = 0.075
"""Width (inches) of one character of a tick label at the report font size, rounded up."""
SLO_COLOR = "tab:red"
SLO_STYLE: dict[str, object] = {"color": SLO_COLOR, "linestyle": "--", "linewidth": 1.0}
"""How every report draws a service-level objective."""
LOG_DECADES = 2.0
"""An axis whose values span more than this many decades (a 2.3e6 ms outlier among hundreds
of ms) is drawn on a log scale; below that, a linear axis from zero."""
SQUASH_FRACTION = 0.1
"""A linear axis whose points' median lies below this share of its maximum squashes them:
it is drawn on a log scale instead (convention 7)."""
SECONDS_FROM_MS = 10_000.0
"""Durations from this many milliseconds are printed in seconds (convention 9): a duration
never shows more than four digits of milliseconds (``9,999 ms``, then ``10 s``), so no cell
reads ``1,609,216 ms`` and a card's ``35.1 s`` fits its box."""
_SUFFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


@dataclass(frozen=True)
class Drawn:
    """A report figure, or ``None`` when no panel has anything to show; ``notes`` are one
    line each about what was left out (shown under the figure, or instead of it)."""

    figure: Figure | None
    notes: tuple[str, ...] = ()


def axis_label(quantity: str, unit: str) -> str:
    """``quantity (unit)``: every axis names its unit."""
    return f"{quantity} ({unit})"


def format_ms(value: float | None) -> str:
    """A duration given in ms: ``8.53 ms``, ``186 ms``, ``1,722 ms`` below
    :data:`SECONDS_FROM_MS`, then seconds: ``13.5 s``, ``72.7 s``, ``1,609 s``; ``—`` when
    missing."""
    if value is None or value != value:
        return "—"
    if abs(value) >= SECONDS_FROM_MS:
        seconds = value / 1000
        return f"{seconds:,.0f} s" if abs(seconds) >= 100 else f"{seconds:.3g} s"
    return f"{value:,.0f} ms" if abs(value) >= 100 else f"{value:.3g} ms"


def squashed(values: np.ndarray) -> bool:
    """Convention 7: True when a linear axis from zero would squash ``values`` (NaN and values
    ≤ 0 ignored): they span more than :data:`LOG_DECADES` decades, or their median is below
    :data:`SQUASH_FRACTION` of their maximum."""
    positive = values[np.isfinite(values) & (values > 0)]
    if positive.size < 2:
        return False
    top = positive.max()
    return bool(
        top / positive.min() > 10**LOG_DECADES or np.median(positive) < SQUASH_FRACTION * top
    )


def compact_number(value: float) -> str:
    """A tick label of at most 6 characters: ``0``, ``0.05``, ``0.125``, ``2.5``, ``950``,
    ``1.2k``, ``15k``, ``1.5M``; 3 significant digits at most, no trailing zeros."""
    if value == 0 or not np.isfinite(value):
        return "0" if value == 0 else ""
    size = abs(value)
    for scale, suffix in _SUFFIXES:
        if size >= scale * 0.9995:
            return _short(value / scale) + suffix
    return _short(value)


def _short(value: float) -> str:
    size = abs(value)
    if size < 1:
        return f"{value:.3g}"
    digits = 0 if size >= 100 else 1 if size >= 10 else 2
    text = f"{value:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


COMPACT = FuncFormatter(lambda value, _pos: compact_number(value))
"""The tick-label formatter of every report axis (:func:`compact_number`)."""


def tidy_axes(ax: Axes, *, log_x: bool = False, zero_y: bool = True) -> None:
    """Apply conventions 2 and 3 to ``ax`` (call after setting scales, before drawing)."""
    for axis, log in ((ax.xaxis, log_x), (ax.yaxis, False)):
        if log:
            axis.set_major_locator(LogLocator(base=10, numticks=MAX_TICKS))
        else:
            axis.set_major_locator(MaxNLocator(nbins=MAX_TICKS - 1, steps=[1, 2, 2.5, 5, 10]))
        axis.set_minor_locator(NullLocator())
        axis.set_major_formatter(COMPACT)
    if zero_y:
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.25)


def place_panels(
    fig: Figure,
    rows: int,
    cols: int = 1,
    *,
    legend: bool = False,
    sharex: bool = True,
    bottom_in: float | None = None,
    legend_rows: int = 0,
) -> list[Axes]:
    """``rows × cols`` panels in fixed margins (:data:`MARGINS_IN`; with ``legend``, a right
    margin of :data:`LEGEND_MARGIN_IN` for legends beside the panels), row by row; with
    ``sharex`` (one column) the panels share the x axis, labelled under the last only, and
    stand :data:`GAP_Y_SHARED_IN` apart; ``bottom_in`` widens the bottom margin (for rotated
    labels). Size the figure with :func:`panels_height`."""
    width, height = fig.get_size_inches()
    m = MARGINS_IN
    right = LEGEND_MARGIN_IN if legend else 0.25
    gap_y = GAP_Y_SHARED_IN if sharex and cols == 1 else m["gap_y"]
    bottom = m["bottom"] if bottom_in is None else bottom_in
    grid = fig.add_gridspec(
        rows, cols, left=m["left"] / width, right=1 - right / width,
        bottom=bottom / height, top=1 - (m["top"] + legend_rows * LEGEND_ROW_IN) / height,
        wspace=m["gap_x"] / ((width - m["left"] - right) / cols),
        hspace=gap_y / ((height - bottom - m["top"]) / rows),
    )  # fmt: skip
    axes = [fig.add_subplot(grid[r, c]) for r in range(rows) for c in range(cols)]
    if sharex and cols == 1:
        for ax in axes[:-1]:
            ax.sharex(axes[-1])
            ax.tick_params(labelbottom=False)
    return axes


def panels_height(rows: int, panel_in: float, *, shared: bool, legend_rows: int = 0) -> float:
    """Figure height (inches) for ``rows`` panels ``panel_in`` high in :func:`place_panels`
    (with ``legend_rows`` rows of a legend above them)."""
    gap = GAP_Y_SHARED_IN if shared else MARGINS_IN["gap_y"]
    top = MARGINS_IN["top"] + legend_rows * LEGEND_ROW_IN
    return MARGINS_IN["bottom"] + top + rows * panel_in + (rows - 1) * gap


LEGEND_ROW_IN = 0.3
"""Height (inches) of one row of a legend above the panels (:func:`legend_above`)."""
LEGEND_COLUMNS = 4
"""Entries per row of a legend above the panels."""


def legend_rows(entries: int) -> int:
    """Rows of a legend of ``entries`` entries above the panels."""
    return -(-entries // LEGEND_COLUMNS)


def legend_above(fig: Figure, axes: list[Axes]) -> None:
    """One legend of every panel's named lines (each label once) in the top margin that
    :func:`place_panels` left with ``legend_rows``: above every panel, over no data."""
    entries: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    if entries:
        left = MARGINS_IN["left"] / fig.get_figwidth()
        fig.legend(list(entries.values()), list(entries), loc="upper left",  # type: ignore[arg-type]
                   bbox_to_anchor=(left, 1.0), ncol=LEGEND_COLUMNS, frameon=False,
                   borderaxespad=0.2)  # fmt: skip


def legend_beside(ax: Axes, **kwargs: object) -> None:
    """The panel's legend in the right margin, top-aligned with the panel."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, **kwargs)  # type: ignore[arg-type]


def slo_line(ax: Axes, value_ms: float | None, label: str) -> None:
    """A configured latency objective as a dashed vertical line (nothing when unset)."""
    if value_ms:
        ax.axvline(value_ms, label=label, **SLO_STYLE)  # type: ignore[arg-type]


def slo_hline(ax: Axes, value_ms: float, label: str) -> None:
    """A configured latency objective as a dashed horizontal line (a metric-vs-axis chart)."""
    ax.axhline(value_ms, label=label, **SLO_STYLE)  # type: ignore[arg-type]


def text_overlaps(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of visible, non-empty texts of ``fig`` whose boxes intersect, and (text,
    ``"figure edge"``) for a text reaching past the figure (draws the figure).

    A check for tests: figures built by the conventions above give none."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(fig)]
    page = fig.bbox
    found = [(a, "figure edge") for a, box in boxes
             if box.x0 < page.x0 - 1 or box.y0 < page.y0 - 1 or box.x1 > page.x1 + 1
             or box.y1 > page.y1 + 1]  # fmt: skip
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1 :]:
            w = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            h = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if w > 1 and h > 1:
                found.append((a, b))
    return found


def _texts(fig: Figure) -> list[Text]:
    """Every text a drawn figure shows: tick labels of the ticks in view, axis labels,
    titles, legend entries and free texts."""
    found: list[Text] = list(fig.texts)
    for legend in fig.legends:
        found += legend.get_texts()
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for axis in (ax.xaxis, ax.yaxis):
            # the ticks drawn (matplotlib keeps label objects of ticks out of view too)
            for tick in axis._update_ticks():
                found += [tick.label1, tick.label2]
            found += [axis.label, axis.offsetText]
        found += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            found += legend.get_texts()
    return [t for t in found if t.get_visible() and t.get_text().strip()]


LINE_SAMPLES = 16
"""Points sampled along each segment of a line when testing it against a legend's box."""


def legend_overlaps(fig: Figure) -> list[tuple[str, str]]:
    """(legend's first entry, line's label) for each plotted line of ``fig`` that crosses a
    legend's box inside its panel (draws the figure). A check for tests (convention 10)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    found = []
    for legend in legends:
        box = legend.get_window_extent(renderer)
        first = next((t.get_text() for t in legend.get_texts()), "legend")
        for ax in (ax for ax in fig.axes if ax.get_visible()):
            frame = ax.get_window_extent(renderer)
            for line in ax.get_lines():
                points = _sampled(line.get_transform().transform(line.get_xydata()))
                shown = points[_inside(frame, points)]
                if line.get_visible() and _inside(box, shown).any():
                    found.append((first, str(line.get_label())))
    return found


def _sampled(xy: np.ndarray) -> np.ndarray:
    """:data:`LINE_SAMPLES` points along each segment of the polyline ``xy`` (NaN gaps kept
    out)."""
    xy = xy[np.isfinite(xy).all(axis=1)]
    if len(xy) < 2:
        return xy
    t = np.linspace(0.0, 1.0, LINE_SAMPLES)[None, :, None]
    return (xy[:-1, None, :] * (1 - t) + xy[1:, None, :] * t).reshape(-1, 2)


def _inside(box: Bbox, points: np.ndarray) -> np.ndarray:
    """Per point (display px): within ``box``, edges included."""
    if len(points) == 0:
        return np.zeros(0, dtype=bool)
    x, y = points[:, 0], points[:, 1]
    return (box.x0 <= x) & (x <= box.x1) & (box.y0 <= y) & (y <= box.y1)


CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}
"""ISO 4217 codes written as a symbol before the amount (``$6.00``); any other code follows
the amount (``6.00 CHF``), so that every cost names its currency without guessing a symbol."""


def money_unit(currency: str) -> str:
    """The currency as a unit in a header or axis label: ``$`` (``$/h``), ``CHF`` (``CHF/h``)."""
    return CURRENCY_SYMBOLS.get(currency, currency)


def money(amount: float | None, currency: str) -> str:
    """An amount with its currency, the one way every cost is written: ``$6.00``,
    ``$1,234.50``, ``€0.38``, ``6.00 CHF``; two decimals, three significant digits below
    0.01 (``$0.00125``); ``—`` for a missing amount."""
    if amount is None:
        return "—"
    number = f"{amount:,.2f}" if abs(amount) >= 0.01 or amount == 0 else f"{amount:.3g}"
    symbol = CURRENCY_SYMBOLS.get(currency)
    if symbol is None:
        return f"{number} {currency}"
    return f"-{symbol}{number[1:]}" if number.startswith("-") else f"{symbol}{number}"
