"""Figures of the run and comparison reports, built on :class:`matplotlib.figure.Figure`.

No pyplot global state: every figure is a fresh ``Figure`` drawn by the Agg/SVG canvases and
turned into an inline ``<svg>`` string by :func:`svg_of`. Build and save figures inside
``matplotlib.rc_context(dict(REPORT_RC))``: the fixed ``svg.hashsalt`` and the absent date
metadata make the SVG bytes a function of the data alone.

Step series are first reduced by :func:`bin_steps` (at most ``MAX_BINS`` time bins) and latency
samples by :func:`cdf_points` (at most ``MAX_CDF_POINTS`` points), so a figure's size does not
grow with the number of engine steps or requests. Figures follow
:mod:`simkv.report.conventions`; those over time are in :mod:`simkv.report.time_figures`.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simkv.kv.waste import CATEGORY_LABELS
from simkv.metrics.summary import WASTE_COLUMNS, weighted_percentiles
from simkv.report import conventions as cv

REPORT_RC: Mapping[str, object] = MappingProxyType({
    "svg.hashsalt": "simkv-report",
    "svg.fonttype": "path",
    "font.size": 8.5,
    "axes.titlesize": 9.5,
    "legend.fontsize": 7.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "text.parse_math": False,
})  # fmt: skip
"""rcParams every report figure is built and saved under (byte-stable SVG, compact text; no
mathtext, so a name such as ``$\\foo$`` from a config is drawn as written);
read-only: use ``matplotlib.rc_context(dict(REPORT_RC))``."""
MAX_BINS = 2000
"""At most this many time bins per step series."""
THROUGHPUT_BINS = 300
"""Rates over bins much shorter than a prefill burst are mostly noise: fewer bins for tokens/s."""
MAX_CDF_POINTS = 1000
"""At most this many points per CDF line."""
CDF_PANEL_HEIGHT_IN = 2.1
"""Height of one latency-CDF panel (inches), margins excluded."""
LOG_SPAN = 100.0
"""A latency panel gets a log x axis when its samples are all positive and span this factor."""
LATENCY_LABELS: tuple[tuple[str, str], ...] = (
    ("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL"),
)  # fmt: skip

WASTE_COLORS: tuple[str, ...] = ("tab:blue", "tab:orange", "tab:red", "tab:purple", "0.85")
"""Colours of :data:`simkv.kv.waste.CATEGORIES`, as in the waste-study figures."""

TIME_LABEL = "simulated time (s)"
_ID_REFS = (' id="', 'href="#', "url(#")  # where matplotlib writes and references ids
_PATH_DATA = re.compile(r' d="([^"]*)"')
_FINE_DECIMALS = re.compile(r"(?<=\.\d\d)\d+")  # digits past the second decimal
_METADATA_KEYS = ("Date", "Creator", "Format", "Type")  # all dropped: no date, no version
_RATES = (
    "prefill_tokens", "decode_tokens", "preempted", "swap_out_blocks", "swap_in_blocks",
    "cache_hit_tokens",
)  # fmt: skip
_STATES = (
    "batch_size", "num_waiting", "num_running", "num_swapped", "blocks_used", "blocks_free",
    *WASTE_COLUMNS, "cached_blocks", "shared_slots", "evictions",
)  # fmt: skip

LatencySamples = dict[str, tuple[np.ndarray, np.ndarray]]
"""Latency key (``ttft`` …) → (values_ms, counts): every value counted ``counts`` times."""


def cdf_points(
    values: np.ndarray, counts: np.ndarray, max_points: int = MAX_CDF_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF of weighted samples: sorted values and the fraction of weight ≤ each.

    With more distinct samples than ``max_points``, keeps the first sample and the one at each
    of ``max_points - 1`` evenly spaced CDF levels, so the drawn staircase stays exact at those
    levels. Samples with zero weight are dropped.
    """
    keep = counts > 0
    order = np.argsort(values[keep], kind="stable")
    x = values[keep][order]
    cum = np.cumsum(counts[keep][order])
    y = cum / cum[-1]
    if len(x) > max_points:
        idx = np.searchsorted(y, np.linspace(0.0, 1.0, max_points)[1:], side="left")
        idx = np.unique(np.concatenate(([0], np.minimum(idx, len(x) - 1))))
        x, y = x[idx], y[idx]
    return x, y


def bin_steps(steps: pd.DataFrame, max_bins: int = MAX_BINS) -> pd.DataFrame:
    """Step rows reduced to at most ``max_bins`` consecutive time bins.

    With at most ``max_bins`` steps every step is its own bin, running to the next step's
    start (idle time included); otherwise the span is cut into ``max_bins`` equal bins and a
    step falls in the bin holding its start. Columns: ``start_s``, ``end_s`` (contiguous bins);
    event counts summed per bin (``prefill_tokens``, ``preempted``, ``swap_*_blocks`` …) and
    as ``*_per_s`` rates for the token counts; state columns (queues, batch size, blocks, the
    five slot categories) averaged over the bin's steps weighted by step duration, carried
    forward over bins without steps. Empty input gives an empty frame.
    """
    if steps.empty:
        return pd.DataFrame()
    start = steps["time_s"].to_numpy()
    dur = steps["duration_s"].to_numpy()
    end_s = float(start[-1] + dur[-1])
    if len(steps) <= max_bins:
        edges = np.append(start, end_s)
    else:
        edges = np.linspace(start[0], end_s, max_bins + 1)
    n = len(edges) - 1
    idx = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, n - 1)
    width = np.maximum(np.diff(edges), 1e-12)
    out = {"start_s": edges[:-1], "end_s": edges[1:]}
    for col in _RATES:
        out[col] = np.bincount(idx, weights=steps[col].to_numpy(), minlength=n)
    for col in ("prefill_tokens", "decode_tokens"):
        out[f"{col}_per_s"] = out[col] / width
    busy = np.bincount(idx, weights=dur, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        for col in _STATES:
            out[col] = np.bincount(idx, weights=steps[col].to_numpy() * dur, minlength=n) / busy
    frame = pd.DataFrame(out)
    frame[list(_STATES)] = frame[list(_STATES)].ffill().fillna(0.0)
    return frame


def svg_of(fig: Figure, fig_id: str) -> str:
    """The figure as an inline ``<svg>`` element whose ids all start with ``fig_id``.

    Prefixing keeps the ids of several SVGs in one HTML document unique (matplotlib numbers
    them per figure). No XML prolog, no metadata;
    call inside ``rc_context(dict(REPORT_RC))``.
    """
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=dict.fromkeys(_METADATA_KEYS))
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    # path coordinates are in points: two decimals are far below a pixel and halve the bytes
    text = _PATH_DATA.sub(_two_decimals, text)
    for ref in _ID_REFS:  # plain replaces: one C pass each, no Python call per id
        text = text.replace(ref, f"{ref}{fig_id}-")
    return text.rstrip() + "\n"


def _two_decimals(match: re.Match[str]) -> str:
    return ' d="' + _FINE_DECIMALS.sub("", match.group(1)) + '"'


def step_edges(binned: pd.DataFrame) -> np.ndarray:
    """The ``len(binned) + 1`` bin edges (s) of a :func:`bin_steps` frame."""
    return np.append(binned["start_s"].to_numpy()[:1], binned["end_s"].to_numpy())


def per_bin(times_s: np.ndarray, weights: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``weights`` summed per bin of ``edges`` by their time (as :func:`bin_steps` places a
    step: the bin holding it; times outside the edges count in the first or last bin)."""
    n = len(edges) - 1
    idx = np.clip(np.searchsorted(edges, times_s, side="right") - 1, 0, n - 1)
    return np.bincount(idx, weights=weights, minlength=n)


def stairs(ax: Axes, values: np.ndarray, edges: np.ndarray, **kwargs: object) -> None:
    """A piecewise-constant series over bins as one step line (``values[i]`` over bin i).

    A line, not ``Axes.stairs``: its data limits are computed in one vectorized pass."""
    values = np.asarray(values, dtype=np.float64)
    ax.plot(edges, np.append(values, values[-1:]), drawstyle="steps-post", **kwargs)  # type: ignore[arg-type]


def latency_cdf_figure(
    runs: Sequence[tuple[str, LatencySamples]], slo: Mapping[str, float | None] | None = None
) -> cv.Drawn:
    """One panel per latency with samples (TTFT, TPOT, ITL, E2EL): each run's empirical CDF
    with its p50 and p99 marked, and the SLO of that latency (``slo``: ``ttft_ms`` …) as a
    dashed line.

    ITL samples are weighted by their token counts. The x axis is logarithmic when every
    sample is positive and they span :data:`LOG_SPAN`. With one run the panel title gives
    its p50 and p99; with several, a legend above the panels names the runs (and the SLOs,
    conventions 10). Latencies without a sample in any run are left out, with a note.
    """
    slo = slo or {}
    shown = [(k, label) for k, label in LATENCY_LABELS if any(s[k][1].sum() > 0 for _, s in runs)]
    notes = tuple(f"{label}: no samples in this run (panel left out)" for k, label in
                  LATENCY_LABELS if (k, label) not in shown)  # fmt: skip
    if not shown:
        return cv.Drawn(None, notes)
    cols = min(len(shown), 2)
    rows = -(-len(shown) // cols)
    named = (len(runs) if len(runs) > 1 else 0) + sum(bool(slo.get(f"{k}_ms")) for k, _ in shown)
    named += 1 if named and len(runs) == 1 else 0  # the one run's line is named beside an SLO
    above = cv.legend_rows(named)
    height = cv.panels_height(rows, CDF_PANEL_HEIGHT_IN, shared=False, legend_rows=above)
    fig = Figure(figsize=(10.4, height))
    axes = cv.place_panels(fig, rows, cols, sharex=False, legend_rows=above)
    for ax, (key, label) in zip(axes, shown, strict=False):
        _cdf_panel(ax, key, label, runs, slo.get(f"{key}_ms"))
    for ax in axes[len(shown) :]:
        ax.set_visible(False)
    if above:
        cv.legend_above(fig, axes)
    return cv.Drawn(fig, notes)


def cdf_axes(ax: Axes, data: np.ndarray, xlabel: str) -> None:
    """Scale, limits and labels of an empirical CDF panel over ``data``: a log x axis when every
    value is positive and they span :data:`LOG_SPAN` or more, else a linear one from 0."""
    log = bool(data.min() > 0 and data.max() / data.min() >= LOG_SPAN)
    if log:
        ax.set_xscale("log")
    cv.tidy_axes(ax, log_x=log)
    if not log:
        ax.set_xlim(left=0)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction ≤ x")


def _cdf_panel(
    ax: Axes, key: str, label: str, runs: Sequence[tuple[str, LatencySamples]],
    slo_ms: float | None,
) -> None:  # fmt: skip
    marks = []
    every = []
    for name, samples in runs:
        values, counts = samples[key]
        if counts.sum() == 0:
            continue
        x, y = cdf_points(values, counts)
        (line,) = ax.plot(np.r_[x[0], x], np.r_[0.0, y], drawstyle="steps-post", label=name,
                          linewidth=1.3)  # fmt: skip
        p50, p99 = weighted_percentiles(values[counts > 0], counts[counts > 0], [50.0, 99.0])
        ax.plot([p50, p99], [0.5, 0.99], "o", color=line.get_color(), markersize=4)
        marks.append((p50, p99))
        every.append(values[counts > 0])
    cv.slo_line(ax, slo_ms, f"{label} SLO ≤ {cv.format_ms(slo_ms)}" if slo_ms else "")
    cdf_axes(ax, np.concatenate(every), cv.axis_label(label, "ms"))
    if len(runs) == 1:
        p50, p99 = marks[0]
        ax.set_title(f"{label}: p50 {cv.format_ms(p50)} · p99 {cv.format_ms(p99)} (dots)",
                     loc="left")  # fmt: skip
    else:
        ax.set_title(f"{label} (dots: p50 and p99)", loc="left")


def waste_bar_figure(runs: Sequence[tuple[str, Mapping[str, float | None]]]) -> Figure:
    """One stacked bar per run: the time-averaged five-way split of its KV pool (%).

    ``runs`` pairs a name with a summary (``mean_*_frac`` keys). The text above a bar is the
    wasted share (reservation + internal + external fragmentation); "nothing ran" if absent.
    """
    names = [short_name(name) for name, _ in runs]
    rotate = len(runs) > 1  # names side by side would collide: read them upwards
    # rotated names hang below the axis: the margin grows with the longest
    bottom = cv.MARGINS_IN["bottom"] + (cv.CHAR_WIDTH_IN * max(map(len, names)) if rotate else 0)
    fig = Figure(figsize=(cv.MARGINS_IN["left"] + cv.LEGEND_MARGIN_IN + 0.6 + 1.1 * len(runs),
                          3.3 + bottom))  # fmt: skip
    (ax,) = cv.place_panels(fig, 1, legend=True, bottom_in=bottom)
    keys = [f"mean_{col.removesuffix('_slots')}_frac" for col in WASTE_COLUMNS]
    shares = np.array([[_pct(summary.get(k)) for k in keys] for _, summary in runs]).reshape(
        len(runs), len(keys)
    )
    x = np.arange(len(runs))
    bottom = np.zeros(len(runs))
    for i, (label, color) in enumerate(zip(CATEGORY_LABELS, WASTE_COLORS, strict=True)):
        ax.bar(x, shares[:, i], bottom=bottom, width=0.55, label=label, color=color)
        bottom += np.nan_to_num(shares[:, i])
    wasted = shares[:, 1:4].sum(axis=1)
    for i, share in enumerate(wasted):
        text = "nothing ran" if np.isnan(share) else f"{share:.1f}% wasted"
        ax.text(i, 101, text, ha="center", va="bottom", fontsize=7)
    cv.tidy_axes(ax)
    ax.grid(False)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_xticks(x, names, rotation=90 if rotate else 0)
    ax.set_xlim(-0.6, len(runs) - 0.4)
    ax.set_ylim(0, 112)
    ax.set_ylabel(cv.axis_label("KV pool, time-averaged", "%"))
    cv.legend_beside(ax)
    return fig


def short_name(name: str, limit: int = 18) -> str:
    """A run name as a tick label: at most ``limit`` characters (an ellipsis marks the cut)."""
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _pct(frac: float | None) -> float:
    return float("nan") if frac is None else 100.0 * frac


def kv_usage_figure(runs: Sequence[tuple[str, pd.DataFrame]]) -> cv.Drawn:
    """Share of the KV pool in use over time, one line per run (binned step series)."""
    if all(binned.empty for _, binned in runs):
        return cv.Drawn(None, ("no engine steps in these runs",))
    fig = Figure(figsize=(10.4, 3.0))
    (ax,) = cv.place_panels(fig, 1, legend=True)
    for name, binned in runs:
        if binned.empty:
            continue
        used = binned["blocks_used"] / (binned["blocks_used"] + binned["blocks_free"])
        stairs(ax, used.to_numpy() * 100, step_edges(binned), label=short_name(name, 24),
               linewidth=1.0)  # fmt: skip
    cv.tidy_axes(ax)
    ax.set_ylim(0, 105)
    ax.set_ylabel(cv.axis_label("KV pool in use", "%"))
    ax.set_xlabel(TIME_LABEL)
    cv.legend_beside(ax)
    return cv.Drawn(fig)
