"""Figures over simulated time: throughput against offered load, KV memory, queues.

Every series is per bin of :func:`simkv.report.figures.bin_steps` (rates are per second of
the bin; states are duration-weighted means), and request events (arrivals, completions) are
put in the same bins by :func:`simkv.report.figures.per_bin`. Panels follow
:mod:`simkv.report.conventions`: a panel with nothing to show is left out with a note.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simkv.config.sim import GIB
from simkv.kv.waste import CATEGORY_LABELS
from simkv.metrics.summary import WASTE_COLUMNS
from simkv.report import conventions as cv
from simkv.report import figures as fg

PANEL_HEIGHT_IN = 1.55
"""Height of one panel of a time figure (inches), margins excluded."""

Panel = Callable[[Axes], None]


def stack(panels: Sequence[tuple[str, Panel]], *, legend: bool = True) -> Figure:
    """Panels stacked over one shared time axis, each drawn by its function and labelled with
    its y-axis label; the time axis is labelled under the last."""
    fig = Figure(figsize=(10.4, cv.panels_height(len(panels), PANEL_HEIGHT_IN, shared=True)))
    axes = cv.place_panels(fig, len(panels), legend=legend)
    for ax, (ylabel, draw) in zip(axes, panels, strict=True):
        draw(ax)
        cv.tidy_axes(ax)
        ax.set_ylabel(ylabel)
        if ax.get_legend_handles_labels()[0]:
            cv.legend_beside(ax)
    axes[-1].set_xlabel(fg.TIME_LABEL)
    # the time axis spans the data exactly (shared axes would pad it otherwise)
    axes[-1].set_xlim(min(ax.dataLim.x0 for ax in axes), max(ax.dataLim.x1 for ax in axes))
    return fig


def offered_load(requests: pd.DataFrame, edges: np.ndarray) -> dict[str, np.ndarray]:
    """Per bin of ``edges``: requests and prompt tokens arriving per second, and requests
    finishing per second."""
    width = np.maximum(np.diff(edges), 1e-12)
    arrival = requests["arrival_s"].to_numpy()
    done = requests[requests["status"] == "finished"]
    ones = np.ones(len(arrival))
    prompt = requests["prompt_tokens"].to_numpy(np.float64)
    return {
        "arrived": fg.per_bin(arrival, ones, edges) / width,
        "prompt_tokens": fg.per_bin(arrival, prompt, edges) / width,
        "finished": fg.per_bin(done["finish_s"].to_numpy(), np.ones(len(done)), edges) / width,
    }


def throughput_figure(binned: pd.DataFrame, requests: pd.DataFrame) -> cv.Drawn:
    """Tokens/s (prefill, decode, and the prompt tokens arriving: the offered prefill load),
    requests/s (arriving vs finishing) and the batch size, per time bin."""
    if binned.empty:
        return cv.Drawn(None, ("no engine steps in this run",))
    edges = fg.step_edges(binned)
    load = offered_load(requests, edges)

    def tokens(ax: Axes) -> None:
        fg.stairs(ax, binned["prefill_tokens_per_s"], edges, label="prefill", linewidth=1.0)
        fg.stairs(ax, binned["decode_tokens_per_s"], edges, label="decode", linewidth=1.0)
        fg.stairs(ax, load["prompt_tokens"], edges, label="offered\n(prompts arriving)",
                  color="0.2", linestyle="--", linewidth=0.9)  # fmt: skip

    def rates(ax: Axes) -> None:
        fg.stairs(ax, load["arrived"], edges, label="arriving (offered)", color="0.2",
                  linestyle="--", linewidth=0.9)  # fmt: skip
        fg.stairs(ax, load["finished"], edges, label="finishing", color="tab:green", lw=1.0)

    def batch(ax: Axes) -> None:
        fg.stairs(ax, binned["batch_size"], edges, color="tab:purple", linewidth=1.0)

    return cv.Drawn(stack([(cv.axis_label("throughput", "tokens/s"), tokens),
                           (cv.axis_label("requests", "req/s"), rates),
                           (cv.axis_label("batch", "seqs"), batch)]))  # fmt: skip


def kv_memory_figure(binned: pd.DataFrame, pool_bytes: int) -> cv.Drawn:
    """The KV pool over time as a stacked area of the five waste categories, in % of the pool
    (the label gives the pool in GiB when ``pool_bytes`` is known)."""
    if binned.empty:
        return cv.Drawn(None, ("no engine steps in this run",))
    edges = fg.step_edges(binned)
    slots = binned[list(WASTE_COLUMNS)].to_numpy(np.float64)
    total = slots.sum(axis=1, keepdims=True)
    tops = np.cumsum(np.divide(slots * 100, total, out=np.zeros_like(slots), where=total > 0), 1)
    pool = f"; 100 % = {pool_bytes / GIB:.3g} GiB" if pool_bytes > 0 else ""

    def layers(ax: Axes) -> None:
        # each layer's top filled down to zero, the highest first: one outline per polygon
        for k in reversed(range(len(WASTE_COLUMNS))):
            top = np.append(tops[:, k], tops[-1:, k])
            ax.fill_between(edges, top, step="post", color=fg.WASTE_COLORS[k],
                            label=CATEGORY_LABELS[k], linewidth=0)  # fmt: skip
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False)  # fmt: skip
        ax.set_xlim(edges[0], edges[-1])

    fig = stack([(f"KV pool (%{pool})", layers)])
    fig.axes[0].set_ylim(0, 100)
    return cv.Drawn(fig)


def queue_figure(binned: pd.DataFrame, block_bytes: int) -> cv.Drawn:
    """Queue lengths over time; cumulative preemptions and swap traffic (GiB) only when the
    run had any (else one line of text each)."""
    if binned.empty:
        return cv.Drawn(None, ("no engine steps in this run",))
    edges = fg.step_edges(binned)
    end = binned["end_s"].to_numpy()
    swapped = binned["num_swapped"].to_numpy().any()
    moved = binned[["swap_out_blocks", "swap_in_blocks"]].to_numpy().sum()

    def queues(ax: Axes) -> None:
        for col in ("num_waiting", "num_running", "num_swapped")[: 3 if swapped else 2]:
            fg.stairs(ax, binned[col], edges, label=col.removeprefix("num_"), linewidth=1.0)

    def preemptions(ax: Axes) -> None:
        ax.plot(np.r_[edges[0], end], np.r_[0, binned["preempted"].cumsum()],
                drawstyle="steps-post", color="tab:red", linewidth=1.0)  # fmt: skip

    def swaps(ax: Axes) -> None:
        for col, style in (("swap_out_blocks", "--"), ("swap_in_blocks", ":")):
            gib = binned[col].cumsum() * block_bytes / GIB
            label = col.removesuffix("_blocks").replace("_", " ")
            ax.plot(np.r_[edges[0], end], np.r_[0, gib], drawstyle="steps-post",
                    color="tab:purple", linestyle=style, label=label)  # fmt: skip

    panels: list[tuple[str, cv.Panel]] = [(cv.axis_label("queues", "requests"), queues)]
    notes = []
    if binned["preempted"].sum() > 0:
        panels.append((cv.axis_label("preemptions", "cumulative"), preemptions))
    else:
        notes.append("no preemptions in this run")
    if moved > 0:
        panels.append((cv.axis_label("swapped", "GiB, cumulative"), swaps))
    else:
        notes.append("no swapping in this run")
    return cv.Drawn(stack(panels), tuple(notes))


def compare_time_figure(
    runs: Sequence[tuple[str, pd.DataFrame, pd.DataFrame]],
) -> cv.Drawn:
    """Several runs over time, one line per run: output tokens/s, finished requests/s (each
    run's arrivals dashed in its colour), and waiting and running requests. ``runs`` are
    (name, binned steps, requests)."""
    drawn = [(name, binned, requests) for name, binned, requests in runs if not binned.empty]
    if not drawn:
        return cv.Drawn(None, ("no engine steps in these runs",))
    colors = [f"C{i % 10}" for i in range(len(drawn))]

    def each(column: str | None) -> cv.Panel:
        def draw(ax: Axes) -> None:
            for (name, binned, requests), color in zip(drawn, colors, strict=True):
                edges = fg.step_edges(binned)
                # runs are named in the first panel's legend only: same colours below
                label = fg.short_name(name) if column == first else None
                if column is not None:
                    fg.stairs(ax, binned[column], edges, color=color, label=label, lw=1.0)
                    continue
                load = offered_load(requests, edges)
                fg.stairs(ax, load["finished"], edges, color=color, lw=1.0)
                fg.stairs(ax, load["arrived"], edges, color=color, linestyle="--", lw=0.8)
            if column is None:
                ax.plot([], [], color="0.3", lw=1.0, label="finishing")
                ax.plot([], [], color="0.3", lw=0.8, linestyle="--", label="arriving")

        return draw

    first = "decode_tokens_per_s"
    return cv.Drawn(stack([
        (cv.axis_label("decode", "tokens/s"), each(first)),
        (cv.axis_label("requests", "req/s"), each(None)),
        (cv.axis_label("waiting", "requests"), each("num_waiting")),
        (cv.axis_label("running", "requests"), each("num_running")),
    ]))  # fmt: skip
