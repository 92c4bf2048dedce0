"""The KV-tier section of a run report (a run with ``kv_cache.tiers`` or ``fleet.remote_tier``,
whose requests frame has ``hit_tokens_<kind>`` columns, :mod:`simkv.metrics.tiers`).

* Cards: each tier's hit rate (prompt tokens it supplied / prompt tokens of admitted requests)
  with the requests it served, and the load time on the TTFT path (p50 / p99 of the requests
  that loaded).
* Where prompts came from: per arrival-time bin, the share of the admitted requests' prompt
  tokens found in HBM, loaded from each tier, and computed, stacked to 100 %
  (:func:`~simkv.metrics.tiers.prefix_sources`).
* Tiers over time: each tier's blocks in use after every store (the ``tiers`` frame), as a
  share of its capacity, and the requests loading (time-averaged per bin).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from simkv.metrics.tiers import prefix_sources, tier_kinds
from simkv.report import conventions as cv
from simkv.report import figures as fg
from simkv.report.blocks import Card, FigureBlock, bins_note, figure_block
from simkv.report.disagg_figures import mean_in_intervals
from simkv.report.run_folder import RunFolder
from simkv.report.time_figures import stack

SOURCE_COLORS = {
    "hbm": "tab:green", "cpu": "tab:blue", "disk": "tab:purple", "remote": "tab:brown",
    "computed": "0.78",
}  # fmt: skip
"""One colour per source of a prompt's KV (computed: grey)."""
SOURCE_LABELS = {"hbm": "HBM hit", "cpu": "CPU tier", "disk": "disk tier",
                 "remote": "remote tier", "computed": "computed"}  # fmt: skip
ARRIVAL_BINS = 40
"""Arrival-time bins of the where-prompts-came-from figure."""


def has_tiers(requests: pd.DataFrame) -> bool:
    """Whether the run's requests carry KV-tier columns."""
    return bool(tier_kinds(requests))


def tier_cards(run: RunFolder) -> list[Card]:
    """One card per tier kind (``card-tier-<kind>``) and the load time (``card-tier-load``);
    none for a run without tiers."""
    requests = run.frames.requests
    if not has_tiers(requests):
        return []
    s = run.summary.get
    cards = []
    for kind in tier_kinds(requests):
        rate = s(f"tier_hit_rate_{kind}")
        served = s(f"tier_hit_requests_{kind}")
        cards.append(Card(
            f"card-tier-{kind}", f"{kind.upper() if kind == 'cpu' else kind.capitalize()} tier",
            (("hit", "—" if rate is None else f"{rate:.1%}"),),
            f"of prompt tokens; {served or 0:,} requests loaded from it",
        ))  # fmt: skip
    p50, p99 = s("tier_load_ms_p50"), s("tier_load_ms_p99")
    cards.append(Card(
        "card-tier-load", "Tier load time",
        (("p50", "—" if p50 is None else cv.format_ms(p50)),
         ("p99", "—" if p99 is None else cv.format_ms(p99))),
        f"on the TTFT path of {s('tier_loads') or 0:,} loads",
    ))  # fmt: skip
    return cards


def tier_figure_blocks(run: RunFolder, binned: pd.DataFrame) -> list[FigureBlock]:
    """The KV-tier figures (``fig-tier-sources``, ``fig-tier-time``); none without tiers."""
    requests = run.frames.requests
    if not has_tiers(requests):
        return []
    return [
        figure_block(
            "fig-tier-sources", "KV tiers: where prompts came from",
            "Share of the prompt tokens of the requests arriving in each bin "
            f"({ARRIVAL_BINS} equal bins of arrival time) found in HBM at admission, loaded "
            "from each tier before the prefill (at its bandwidth: never free), or computed.",
            sources_figure(prefix_sources(requests)),
        ),
        figure_block(
            "fig-tier-time", "KV tiers over time",
            "Each tier's blocks in use (% of its capacity, after every store) and the "
            "requests waiting for a load, time-averaged per bin "
            f"({bins_note(binned, run.frames.steps)}).",
            occupancy_figure(run, binned),
        ),
    ]  # fmt: skip


def sources_figure(sources: pd.DataFrame) -> cv.Drawn:
    """Stacked shares of the prompt tokens by source, per arrival-time bin."""
    if sources.empty:
        return cv.Drawn(None, ("no request was admitted",))
    arrival = sources["arrival_s"].to_numpy()
    edges = np.linspace(arrival.min(), max(arrival.max(), arrival.min() + 1e-9), ARRIVAL_BINS + 1)
    which = np.clip(np.searchsorted(edges, arrival, side="right") - 1, 0, ARRIVAL_BINS - 1)
    names = [c for c in sources.columns if c != "arrival_s"]
    sums = np.array([np.bincount(which, sources[n].to_numpy(np.float64), ARRIVAL_BINS)
                     for n in names])  # fmt: skip
    shares = 100 * sums / np.maximum(sums.sum(axis=0), 1.0)

    def draw(ax: Axes) -> None:
        bottom = np.zeros(ARRIVAL_BINS)
        for name, share in zip(names, shares, strict=True):
            color, label = SOURCE_COLORS.get(name, "0.5"), SOURCE_LABELS.get(name, name)
            ax.stairs(share + bottom, edges, baseline=bottom, fill=True, linewidth=0,
                      color=color, label=label)  # fmt: skip
            bottom = bottom + share
        ax.set_ylim(0, 100)

    fig = stack([(cv.axis_label("prompt tokens", "%"), draw)])
    fig.axes[-1].set_xlabel(cv.axis_label("arrival time", "s"))
    return cv.Drawn(fig)


def occupancy_figure(run: RunFolder, binned: pd.DataFrame) -> cv.Drawn:
    """Each tier's use (% of capacity) and the requests loading, over time."""
    tiers, requests = run.frames.tiers, run.frames.requests
    if binned.empty or tiers is None or tiers.empty:
        return cv.Drawn(None, ("no block reached a tier in this run",))
    capacity = _capacities(run)
    edges = fg.step_edges(binned)

    def use(ax: Axes) -> None:
        for kind, rows in tiers.groupby("tier", sort=False):
            blocks = rows["blocks"].to_numpy(np.float64)
            ax.step(rows["time_s"], 100 * blocks / capacity.get(str(kind), blocks.max() or 1),
                    where="post", linewidth=1.0, color=SOURCE_COLORS.get(str(kind), "0.4"),
                    label=SOURCE_LABELS.get(str(kind), str(kind)))  # fmt: skip

    def loading(ax: Axes) -> None:
        start = requests["tier_load_start_s"].to_numpy(np.float64)
        end = requests["tier_load_end_s"].to_numpy(np.float64)
        fg.stairs(ax, mean_in_intervals(start, end, edges), edges, color="tab:red", linewidth=1.0)

    panels = [(cv.axis_label("in use", "% of tier"), use),
              (cv.axis_label("loading", "requests"), loading)]  # fmt: skip
    return cv.Drawn(stack(panels))


def _capacities(run: RunFolder) -> dict[str, float]:
    """Blocks each tier kind holds (a kind's tiers summed over the replicas that have one)."""
    out: dict[str, float] = {}
    for kind in tier_kinds(run.frames.requests):
        value = run.summary.get(f"tier_capacity_blocks_{kind}")
        if isinstance(value, int | float) and value > 0:
            out[kind] = float(value)
    return out
