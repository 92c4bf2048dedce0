"""Figures of the simulated-vs-measured report: overlaid latency CDFs and load over time.

The measured engine's load is a time series sampled once per logger tick (``running``,
``waiting``, ``kv_usage``); the simulated run's is its step rows. :func:`sim_ticks` brings the
steps onto the measured tick grid: each tick's value is the mean of the step state over the
tick ``(t − tick_s, t]``, weighted by how long each step overlaps it; time no step covers is an
idle engine (nothing running or waiting, no KV block in use). Build figures inside
``matplotlib.rc_context(dict(figures.REPORT_RC))``, as every report figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simkv.report import conventions as cv
from simkv.report import figures as fg

SIDES: tuple[tuple[str, str], ...] = (("measured", "tab:blue"), ("simulated", "tab:orange"))
"""(label, colour) of the two sides, in drawing order."""
SERIES: tuple[tuple[str, str], ...] = (
    ("running", "running (requests)"), ("waiting", "waiting (requests)"),
    ("kv_usage_pct", "KV usage (%)"),
)  # fmt: skip
"""(column, axis label) of each load panel, in display order."""
TIME_AXIS = "time since first arrival (s)"


def _integral(steps: pd.DataFrame, values: np.ndarray, at_s: np.ndarray) -> np.ndarray:
    """∫₀ᵗ of the piecewise-constant step series (``values`` over each step, 0 between) at
    each ``t`` in ``at_s`` (value · s)."""
    start = steps["time_s"].to_numpy(np.float64)
    end = start + steps["duration_s"].to_numpy(np.float64)
    area = values * (end - start)
    before = np.concatenate(([0.0], np.cumsum(area)[:-1]))
    xs = np.column_stack((start, end)).ravel()
    ys = np.column_stack((before, before + area)).ravel()
    return np.interp(at_s, xs, ys, left=0.0, right=float(ys[-1]))


def sim_ticks(steps: pd.DataFrame, tick_end_s: np.ndarray, tick_s: float) -> pd.DataFrame:
    """The simulated load over the ticks ending at ``tick_end_s`` (s), each ``tick_s`` long.

    Columns: ``t_s`` (tick end), ``running`` and ``waiting`` (requests), ``kv_usage_pct`` (%
    of the KV pool in use: ``blocks_used / (blocks_used + blocks_free)``), each the
    duration-weighted mean over the tick (see the module docstring). No steps: an empty frame.
    """
    if steps.empty:
        return pd.DataFrame(columns=["t_s", *(col for col, _ in SERIES)])
    used = steps["blocks_used"].to_numpy(np.float64)
    pool = used + steps["blocks_free"].to_numpy(np.float64)
    state = {
        "running": steps["num_running"].to_numpy(np.float64),
        "waiting": steps["num_waiting"].to_numpy(np.float64),
        "kv_usage_pct": np.divide(used * 100.0, pool, out=np.zeros_like(used), where=pool > 0),
    }
    out = {"t_s": tick_end_s}
    for col, values in state.items():
        hi = _integral(steps, values, tick_end_s)
        lo = _integral(steps, values, tick_end_s - tick_s)
        out[col] = (hi - lo) / tick_s
    return pd.DataFrame(out)


def tick_grid(measured_t_s: np.ndarray, until_s: float) -> tuple[np.ndarray, float]:
    """Tick ends (s) for the simulated series: the measured ones, continued at the median
    tick until ``until_s`` (the simulated run may last longer); and that tick (s)."""
    tick = float(np.median(np.diff(measured_t_s))) if len(measured_t_s) > 1 else 1.0
    tick = tick if tick > 0 else 1.0
    last = float(measured_t_s[-1]) if len(measured_t_s) else 0.0
    extra = last + tick * np.arange(1, max(0, int(np.ceil((until_s - last) / tick))) + 1)
    return np.concatenate((measured_t_s, extra)), tick


def _cdf_panel(ax: Axes, label: str, sides: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
    for (name, color), (values, counts) in zip(SIDES, sides, strict=True):
        if counts.sum() == 0:
            continue
        x, y = fg.cdf_points(values, counts)
        ax.step(np.r_[x[0], x], np.r_[0.0, y], where="post", label=name, color=color, lw=1.3)
    every = np.concatenate([values[counts > 0] for values, counts in sides])
    log = bool(len(every) and every.min() > 0 and every.max() / every.min() >= fg.LOG_SPAN)
    if log:
        ax.set_xscale("log")
    cv.tidy_axes(ax, log_x=log, zero_y=False)
    if not log:
        ax.set_xlim(left=0)
    ax.set_xlabel(f"{label} (ms)")
    ax.set_ylabel("fraction ≤ x")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.25)


def cdf_figure(panels: Sequence[tuple[str, fg.LatencySamples]]) -> Figure:
    """One panel per latency (``label``, {measured/simulated: (values_ms, counts)}): the
    empirical CDF of both sides. The caller passes only latencies with samples on a side."""
    fig = Figure(figsize=(10.4, 3.4 if len(panels) <= 3 else 5.6))
    cols = min(len(panels), 3)
    rows = -(-len(panels) // cols)
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    for ax, (label, samples) in zip(axes, panels, strict=False):
        _cdf_panel(ax, label, [samples[name] for name, _ in SIDES])
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    # one legend above the panels, clear of every curve
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(SIDES), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    return fig


def load_figure(measured: pd.DataFrame, simulated: pd.DataFrame, columns: list[str]) -> Figure:
    """Stacked panels sharing the time axis, one per column of ``columns``: the measured
    series (per logger tick) and the simulated one (per tick, :func:`sim_ticks`)."""
    labels = dict(SERIES)
    fig = Figure(figsize=(10.4, 1.2 + 1.8 * len(columns)))
    axes = np.atleast_1d(fig.subplots(len(columns), 1, sharex=True))
    for ax, col in zip(axes, columns, strict=True):
        for (name, color), frame in zip(SIDES, (measured, simulated), strict=True):
            ax.step(frame["t_s"], frame[col], where="pre", label=name, color=color, lw=1.0)
        ax.set_ylabel(labels[col])
        cv.tidy_axes(ax)
        if col == "kv_usage_pct":
            ax.set_ylim(0, 105)
        else:
            ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.25)
    axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    axes[-1].set_xlabel(TIME_AXIS)
    axes[-1].set_xlim(left=0)
    fig.tight_layout()
    return fig
