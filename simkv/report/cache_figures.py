"""Prefix-cache figure of the run report: what the cache holds, shares, hits and evicts."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from simkv.report.figures import finish_time_panels, step_edges, time_panels


def prefix_cache_figure(binned: pd.DataFrame, block_size: int) -> Figure:
    """Cached blocks and slots saved by sharing over time, above cumulative hits/evictions."""
    fig, top, bottom = time_panels(binned)
    if binned.empty:
        return fig
    edges = step_edges(binned)
    top.stairs(binned["cached_blocks"], edges, label="cached blocks", baseline=None)
    top.stairs(
        binned["shared_slots"] / max(block_size, 1), edges, baseline=None,
        label="blocks saved by sharing",
    )  # fmt: skip
    top.set_ylabel("blocks")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    end = binned["end_s"]
    bottom.step(end, binned["cache_hit_tokens"].cumsum(), where="post", label="hit tokens")
    bottom.set_ylabel("prefix-hit tokens (cumulative)")
    evict = bottom.twinx()
    evict.step(end, binned["evictions"], where="post", color="tab:red", linestyle="--",
               label="evictions")  # fmt: skip
    evict.set_ylabel("evicted blocks (cumulative)")
    evict.spines["right"].set_visible(True)
    evict.set_ylim(bottom=0)
    handles = bottom.get_legend_handles_labels()[0] + evict.get_legend_handles_labels()[0]
    bottom.legend(handles=handles, loc="upper left")
    return finish_time_panels(fig, top, bottom)
