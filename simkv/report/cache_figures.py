"""Prefix-cache figure of the run report: what the cache holds, and where its hits come from.

What the step columns count (:mod:`simkv.kv.prefix_cache`): ``cached_blocks`` is every block
that holds a registered content hash — in use by a request, or free and kept until its reuse
evicts it. Every full block of every request is registered, so on a trace without shared
content it is most of the pool and says nothing about sharing. ``cache_hit_tokens`` counts
prompt tokens found cached at an admission; the requests frame splits them into hits at the
first admission (``prefix_hit_tokens``: prefixes shared with earlier requests) and the rest,
re-hits of a request's own blocks when it is re-admitted after a preemption (recompute).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from simkv.report import conventions as cv
from simkv.report import figures as fg
from simkv.report.time_figures import stack


def hit_split(requests: pd.DataFrame) -> tuple[int, int]:
    """Prompt tokens served from the prefix cache: (at first admissions, i.e. prefixes shared
    with earlier requests; re-hits after preemption)."""
    first = int(requests["prefix_hit_tokens"].sum())
    return first, int(requests["cache_hit_tokens"].sum()) - first


def _saved_over_time(
    binned: pd.DataFrame, requests: pd.DataFrame, edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative hit tokens at each bin's end: at first admissions (placed at the request's
    ``first_scheduled_s``), and the rest of the steps' hits (re-hits after preemption)."""
    admitted = requests[requests["first_scheduled_s"].notna()]
    at_first = fg.per_bin(admitted["first_scheduled_s"].to_numpy(),
                          admitted["prefix_hit_tokens"].to_numpy(np.float64), edges)  # fmt: skip
    first_cum = np.cumsum(at_first)
    return first_cum, np.maximum(np.cumsum(binned["cache_hit_tokens"].to_numpy()) - first_cum, 0)


def prefix_cache_figure(binned: pd.DataFrame, requests: pd.DataFrame, block_size: int) -> cv.Drawn:
    """Blocks holding cached content, cumulative prefill tokens saved (shared prefixes vs
    re-hits after preemption) and cumulative evictions; nothing when nothing was ever hit."""
    first, again = hit_split(requests)
    if binned.empty or first + again == 0:
        return cv.Drawn(None, ("no prefix-cache hits in this run: no request found a cached "
                               "prefix (figure left out)",))  # fmt: skip
    edges = fg.step_edges(binned)
    first_cum, again_cum = _saved_over_time(binned, requests, edges)
    shared = binned["shared_slots"].to_numpy() / max(block_size, 1)
    notes = [] if shared.any() else ["no block was shared by two running requests"]

    def held(ax: Axes) -> None:
        fg.stairs(ax, binned["cached_blocks"], edges, linewidth=1.0,
                  label="holding cached content\n(in use or free)")  # fmt: skip
        fg.stairs(ax, binned["blocks_used"], edges, linewidth=0.8, color="0.5", label="in use")
        if shared.any():
            fg.stairs(ax, shared, edges, linewidth=1.0, label="saved by sharing\n(copies not made)")

    def saved(ax: Axes) -> None:
        x = np.r_[edges[0], binned["end_s"].to_numpy()]
        ax.plot(x, np.r_[0, first_cum], drawstyle="steps-post", label="shared prefixes\n"
                "(first admission)")  # fmt: skip
        ax.plot(x, np.r_[0, again_cum], drawstyle="steps-post", linestyle="--",
                label="own blocks re-hit\nafter preemption")  # fmt: skip

    def evicted(ax: Axes) -> None:
        ax.plot(np.r_[edges[0], binned["end_s"].to_numpy()], np.r_[0, binned["evictions"]],
                drawstyle="steps-post", color="tab:red", linewidth=1.0)  # fmt: skip

    panels: list[tuple[str, cv.Panel]] = [
        (cv.axis_label("KV blocks", "blocks"), held),
        (cv.axis_label("prefill saved", "tokens, cum."), saved),
    ]
    if binned["evictions"].iloc[-1] > 0:
        panels.append((cv.axis_label("evicted", "blocks, cum."), evicted))
    else:
        notes.append("no cached block was evicted")
    return cv.Drawn(stack(panels), tuple(notes))
