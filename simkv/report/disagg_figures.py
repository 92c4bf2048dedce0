"""The prefill/decode section of a run report (a fleet with ``disaggregation:``, whose requests
frame has ``prefill_replica``, :mod:`simkv.metrics.disagg`): cards, where TTFT goes, and the KV
transfers over time.

* Cards: the share of requests prefilled remotely, the KV moved (GB, 10⁹ bytes, as link
  bandwidths are given) and the link's busy share (summary ``link_busy_frac``).
* Where TTFT goes: one stacked horizontal bar of the summary's ``mean_ttft_<part>_ms``
  (:data:`~simkv.metrics.disagg.TTFT_PARTS`, in order; they sum to the mean TTFT of the
  remotely prefilled requests).
* KV transfers over time: per time bin of the report's step bins, the time-averaged number of
  requests whose KV is on the link (``kv_send_s ≤ t < kv_arrive_s``) and of those whose KV is
  held on the prefill side waiting for decode blocks (``kv_handoff_s ≤ t < kv_send_s``),
  computed exactly from the intervals (:func:`mean_in_intervals`).

A run without ``prefill_replica`` gets none of this (:func:`is_disaggregated`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simkv.metrics.disagg import TTFT_PARTS
from simkv.report import conventions as cv
from simkv.report import figures as fg
from simkv.report.blocks import Card, FigureBlock, bins_note, figure_block, format_value
from simkv.report.run_folder import RunFolder
from simkv.report.time_figures import stack

GB = 1e9
"""Bytes per GB (decimal, as link bandwidths are quoted)."""
PART_LABELS = {
    "prefill_queue": "prefill queue", "prefill": "prefill", "kv_wait": "KV wait",
    "transfer": "transfer", "decode_queue": "decode queue", "decode_step": "decode step",
}  # fmt: skip
"""Legend names of the TTFT parts (``KV wait``: held for decode blocks)."""
PART_COLORS = ("tab:orange", "tab:red", "tab:olive", "tab:purple", "tab:cyan", "tab:blue")
"""One colour per TTFT part: prefill side warm, the link in between, decode side cool."""
SPLIT_PANEL_IN = 1.35
"""Height (inches) of the TTFT-split panel: tall enough for its six-entry legend beside it."""


def is_disaggregated(requests: pd.DataFrame) -> bool:
    """Whether the run's requests carry the KV path of a disaggregated fleet."""
    return "prefill_replica" in requests.columns


def disagg_cards(run: RunFolder) -> list[Card]:
    """The prefill/decode cards (ids ``card-remote-prefill``, ``card-kv-moved``,
    ``card-link-busy``); none for a run without disaggregation."""
    if not is_disaggregated(run.frames.requests):
        return []
    s = run.summary.get
    pd_config = (run.config.get("fleet") or {}).get("disaggregation") or {}
    decider = (pd_config.get("decider") or {}).get("kind", "?")
    link = pd_config.get("link")
    link_kind = link.get("kind", "?") if isinstance(link, dict) else str(link)
    moved = s("kv_transfer_bytes")

    def pct(key: str) -> str:
        value = s(key)
        return "—" if value is None else f"{value:.1%}"

    return [
        Card("card-remote-prefill", "Prefilled remotely", (("", pct("remote_prefill_frac")),),
             f"of {format_value(s('num_requests'))} requests; decider {decider}"),
        Card("card-kv-moved", "KV moved",
             (("", "—" if moved is None else f"{moved / GB:.3g} GB"),),
             f"{format_value(s('kv_transfers'))} transfers over {link_kind}"),
        Card("card-link-busy", "Link busy", (("", pct("link_busy_frac")),),
             "share of the run a transfer moved bytes, mean over the NICs that carried one"),
    ]  # fmt: skip


def disagg_figure_blocks(run: RunFolder, binned: pd.DataFrame) -> list[FigureBlock]:
    """The prefill/decode figures (``fig-pd-ttft``, ``fig-pd-transfers``) over the report's
    step bins ``binned``; none for a run without disaggregation."""
    requests = run.frames.requests
    if not is_disaggregated(requests):
        return []
    remote = int((requests["prefill_replica"] >= 0).sum())
    return [
        figure_block(
            "fig-pd-ttft", "Prefill/decode: where TTFT goes",
            f"Mean TTFT of the {remote:,} remotely prefilled requests, split into its parts "
            "(summary mean_ttft_*_ms): queued on the prefill replica, the prefill, KV wait "
            "(the prefill replica holds the KV until the decode replica has blocks for it), "
            "the transfer, queued on the decode replica, and its first step.",
            ttft_split_figure(run.summary),
        ),
        figure_block(
            "fig-pd-transfers", "Prefill/decode: KV transfers over time",
            "Requests whose KV is on the link and requests whose KV is held on the prefill "
            "side waiting for decode blocks, time-averaged per bin "
            f"({bins_note(binned, run.frames.steps)}).",
            transfer_time_figure(binned, requests),
        ),
    ]  # fmt: skip


def ttft_split_figure(summary: dict[str, object]) -> cv.Drawn:
    """One stacked horizontal bar of the mean TTFT parts (ms), its total at its end."""
    means = [summary.get(f"mean_ttft_{part}_ms") for part in TTFT_PARTS]
    if any(not isinstance(m, int | float) for m in means):
        return cv.Drawn(None, ("no request was prefilled remotely",))
    values = np.array(means, dtype=np.float64)
    fig = Figure(figsize=(10.4, cv.panels_height(1, SPLIT_PANEL_IN, shared=True)))
    (ax,) = cv.place_panels(fig, 1, legend=True)
    left = 0.0
    for part, value, color in zip(TTFT_PARTS, values, PART_COLORS, strict=True):
        label = f"{PART_LABELS[part]} {cv.format_ms(float(value))}"
        ax.barh(0, value, left=left, height=0.5, color=color, label=label)
        left += value
    cv.tidy_axes(ax, zero_y=False)
    ax.text(left, 0.32, f"total {cv.format_ms(left)}", ha="right", va="bottom", fontsize=7.5)
    ax.set_yticks([])
    ax.set_ylim(-0.5, 0.6)
    ax.set_xlim(0, max(left, 1e-9))
    ax.set_xlabel(cv.axis_label("mean TTFT, remotely prefilled", "ms"))
    cv.legend_beside(ax)
    return cv.Drawn(fig)


def mean_in_intervals(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per bin of ``edges``: the time-averaged number of intervals ``[start, end)`` open in it
    (each interval's overlap with the bin, summed, over the bin's width)."""
    ok = np.isfinite(start) & np.isfinite(end) & (end > start)
    starts, ends = np.sort(start[ok]), np.sort(end[ok])
    return np.diff(_covered(starts, edges) - _covered(ends, edges)) / np.maximum(
        np.diff(edges), 1e-12
    )


def _covered(times: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``Σ max(0, t − time)`` over the sorted ``times``, at each ``t`` of ``at``."""
    count = np.searchsorted(times, at, side="right")
    prefix = np.r_[0.0, np.cumsum(times)]
    return at * count - prefix[count]


def transfer_time_figure(binned: pd.DataFrame, requests: pd.DataFrame) -> cv.Drawn:
    """KV on the link and KV held for decode blocks (time-averaged requests per bin); the held
    panel only when some KV waited."""
    if binned.empty:
        return cv.Drawn(None, ("no engine steps in this run",))
    col = {name: requests[name].to_numpy(np.float64)
           for name in ("kv_handoff_s", "kv_send_s", "kv_arrive_s")}  # fmt: skip
    if not np.isfinite(col["kv_arrive_s"]).any():
        return cv.Drawn(None, ("no KV transfers in this run",))
    edges = fg.step_edges(binned)
    on_link = mean_in_intervals(col["kv_send_s"], col["kv_arrive_s"], edges)
    held = mean_in_intervals(col["kv_handoff_s"], col["kv_send_s"], edges)

    def line(values: np.ndarray, color: str) -> cv.Panel:
        def draw(ax: Axes) -> None:
            fg.stairs(ax, values, edges, color=color, linewidth=1.0)

        return draw

    panels = [(cv.axis_label("on the link", "requests"), line(on_link, "tab:purple"))]
    notes = []
    if held.any():
        panels.append((cv.axis_label("KV held", "requests"), line(held, "tab:olive")))
    else:
        notes.append("no KV waited for decode blocks")
    return cv.Drawn(stack(panels), tuple(notes))
