"""Figures of the run and comparison reports, built on :class:`matplotlib.figure.Figure`.

No pyplot global state: every figure is a fresh ``Figure`` drawn by the Agg/SVG canvases and
turned into an inline ``<svg>`` string by :func:`svg_of`. Build and save figures inside
``matplotlib.rc_context(dict(REPORT_RC))``: the fixed ``svg.hashsalt`` and the absent date
metadata make the SVG bytes a function of the data alone.

Step series are first reduced by :func:`bin_steps` (at most ``MAX_BINS`` time bins) and latency
samples by :func:`cdf_points` (at most ``MAX_CDF_POINTS`` points), so a figure's size does not
grow with the number of engine steps or requests.
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

from simkv.config.sim import GIB
from simkv.kv.waste import CATEGORY_LABELS
from simkv.metrics.summary import WASTE_COLUMNS

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
LATENCY_LABELS: tuple[tuple[str, str], ...] = (
    ("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL"),
)  # fmt: skip

WASTE_COLORS: tuple[str, ...] = ("tab:blue", "tab:orange", "tab:red", "tab:purple", "0.85")
"""Colours of :data:`simkv.kv.waste.CATEGORIES`, as in the waste-study figures."""

_QUEUES = (("num_waiting", "waiting"), ("num_running", "running"), ("num_swapped", "swapped"))
TIME_LABEL = "simulated time (s)"
_ID_REFS = re.compile(r'(\bid="|href="#|url\(#)')
_PATH_DATA = re.compile(r' d="([^"]*)"')
_FINE_DECIMALS = re.compile(r"(\.\d\d)\d+")
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
    return _ID_REFS.sub(lambda m: f"{m.group(1)}{fig_id}-", text).rstrip() + "\n"


def _two_decimals(match: re.Match[str]) -> str:
    return ' d="' + _FINE_DECIMALS.sub(r"\1", match.group(1)) + '"'


def step_edges(binned: pd.DataFrame) -> np.ndarray:
    """The ``len(binned) + 1`` bin edges (s) of a :func:`bin_steps` frame."""
    return np.append(binned["start_s"].to_numpy()[:1], binned["end_s"].to_numpy())


def no_data(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def latency_cdf_figure(runs: Sequence[tuple[str, LatencySamples]]) -> Figure:
    """One panel per latency (TTFT, TPOT, ITL, E2EL): the empirical CDF of each run.

    The x axis is logarithmic when every sample is positive; ITL samples are weighted by
    their token counts. A legend names the runs when there are several.
    """
    fig = Figure(figsize=(10.4, 5.2))
    axes = fig.subplots(2, 2).ravel()
    for ax, (key, label) in zip(axes, LATENCY_LABELS, strict=True):
        drawn = False
        for name, samples in runs:
            values, counts = samples[key]
            if counts.sum() == 0:
                continue
            x, y = cdf_points(values, counts)
            # start the staircase at 0 so the first jump is drawn
            ax.step(np.r_[x[0], x], np.r_[0.0, y], where="post", label=name, linewidth=1.3)
            drawn = True
        if not drawn:
            no_data(ax, f"{label} samples")
            continue
        if all(np.all(s[key][0] > 0) for _, s in runs):
            ax.set_xscale("log")
        ax.set_xlabel(f"{label} (ms)")
        ax.set_ylabel("fraction ≤ x")
        ax.set_ylim(0, 1.02)
        ax.grid(True, which="both", alpha=0.25)
        if len(runs) > 1:
            ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def time_panels(binned: pd.DataFrame) -> tuple[Figure, Axes, Axes]:
    """A figure of two stacked panels sharing the time axis (placeholders when no steps)."""
    fig = Figure(figsize=(10.4, 4.6))
    top, bottom = fig.subplots(2, 1, sharex=True)
    if binned.empty:
        no_data(top, "engine steps")
        no_data(bottom, "engine steps")
    return fig, top, bottom


def finish_time_panels(fig: Figure, top: Axes, bottom: Axes) -> Figure:
    """Label the time axis, grid both panels from zero, and lay the figure out."""
    bottom.set_xlabel(TIME_LABEL)
    for ax in (top, bottom):
        ax.grid(True, alpha=0.25)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    return fig


def throughput_figure(binned: pd.DataFrame) -> Figure:
    """Prefill and decode tokens/s (per time bin) above the mean batch size of the steps."""
    fig, top, bottom = time_panels(binned)
    if binned.empty:
        return fig
    edges = step_edges(binned)
    top.stairs(binned["prefill_tokens_per_s"], edges, label="prefill", linewidth=1.0, baseline=None)
    top.stairs(binned["decode_tokens_per_s"], edges, label="decode", linewidth=1.0, baseline=None)
    top.set_ylabel("tokens/s")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    bottom.stairs(binned["batch_size"], edges, color="tab:green", linewidth=1.0, baseline=None)
    bottom.set_ylabel("batch size (seqs)")
    return finish_time_panels(fig, top, bottom)


def kv_memory_figure(binned: pd.DataFrame) -> Figure:
    """The KV pool over time as a stacked area of the five waste categories (token slots)."""
    fig = Figure(figsize=(10.4, 3.6))
    ax = fig.add_subplot()
    if binned.empty:
        no_data(ax, "engine steps")
        return fig
    edges = step_edges(binned)
    tops = np.cumsum(binned[list(WASTE_COLUMNS)].to_numpy(), axis=1)
    # each layer's top filled down to zero, the highest first: every polygon has one outline
    # of data points instead of two (a band between layers), which halves the SVG
    for k in reversed(range(len(WASTE_COLUMNS))):
        ax.stairs(tops[:, k], edges, baseline=0.0, fill=True, color=WASTE_COLORS[k],
                  label=CATEGORY_LABELS[k], linewidth=0)  # fmt: skip
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)  # fmt: skip
    ax.set_ylabel("KV token slots")
    ax.set_xlabel(TIME_LABEL)
    ax.margins(x=0, y=0)
    fig.tight_layout()
    return fig


def waste_bar_figure(runs: Sequence[tuple[str, Mapping[str, float | None]]]) -> Figure:
    """One stacked bar per run: the time-averaged five-way split of its KV pool (%).

    ``runs`` pairs a name with a summary (``mean_*_frac`` keys). The text above a bar is the
    wasted share (reservation + internal + external fragmentation); "nothing ran" if absent.
    """
    fig = Figure(figsize=(3.2 + 1.1 * len(runs), 3.8))
    ax = fig.add_subplot()
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
        ax.text(i, 101, text, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [name for name, _ in runs], rotation=20 if len(runs) > 3 else 0)
    ax.set_xlim(-0.6, len(runs) - 0.4)
    ax.set_ylim(0, 112)
    ax.set_ylabel("% of KV pool, time-averaged")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def _pct(frac: float | None) -> float:
    return float("nan") if frac is None else 100.0 * frac


def queue_figure(binned: pd.DataFrame, block_bytes: int) -> Figure:
    """Queue lengths over time above cumulative preemptions and swap traffic (GiB)."""
    fig, top, bottom = time_panels(binned)
    if binned.empty:
        return fig
    for col, label in _QUEUES:
        top.stairs(binned[col], step_edges(binned), label=label, linewidth=1.0, baseline=None)
    top.set_ylabel("requests")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    end = binned["end_s"]
    preempted = binned["preempted"].cumsum()
    bottom.step(end, preempted, where="post", color="tab:red", label="preemptions")
    bottom.set_ylabel("preemptions (cumulative)")
    swap = bottom.twinx()
    for col, style in (("swap_out_blocks", "--"), ("swap_in_blocks", ":")):
        gib = binned[col].cumsum() * block_bytes / GIB
        label = col.removesuffix("_blocks").replace("_", " ")
        swap.step(end, gib, where="post", linestyle=style, color="tab:purple", label=label)
    swap.set_ylabel("swapped GiB (cumulative)")
    swapped_gib = (binned["swap_out_blocks"].sum() + binned["swap_in_blocks"].sum()) * block_bytes
    swap.set_ylim(0, max(swapped_gib / GIB * 1.05, 1.0))
    swap.spines["right"].set_visible(True)
    handles = bottom.get_legend_handles_labels()[0] + swap.get_legend_handles_labels()[0]
    bottom.legend(handles=handles, loc="upper left")
    return finish_time_panels(fig, top, bottom)


def kv_usage_figure(runs: Sequence[tuple[str, pd.DataFrame]]) -> Figure:
    """Share of the KV pool in use over time, one line per run (binned step series)."""
    fig = Figure(figsize=(10.4, 3.4))
    ax = fig.add_subplot()
    if all(binned.empty for _, binned in runs):
        no_data(ax, "engine steps")
        return fig
    for name, binned in runs:
        if binned.empty:
            continue
        used = binned["blocks_used"] / (binned["blocks_used"] + binned["blocks_free"])
        ax.stairs(used * 100, step_edges(binned), label=name, linewidth=1.0, baseline=None)
    ax.set_ylim(0, 105)
    ax.set_ylabel("KV pool in use (%)")
    ax.set_xlabel(TIME_LABEL)
    ax.grid(True, alpha=0.25)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig
