"""The "Distributions" section of the run report: small multiples of per-step and per-request
distributions, as peers (Vidur, ``vllm bench serve``) show them.

* **Engine steps** (the steps frame, one sample per step): batch size (requests), batch tokens
  (prefill + decode tokens), step time (ms), and the simulated times at which requests were
  preempted (a CDF weighted by each step's ``preempted`` count).
* **Request latency** (the requests frame): queueing delay (arrival → first scheduled) and the
  normalised latency (E2E per generated token), both as CDFs.
* **Workload**: prompt and output lengths (tokens) and inter-arrival times (ms), histograms.

Histograms count samples in at most :data:`MAX_HIST_BINS` equal bins (integer-wide for
integer data of small range); CDFs reuse :func:`simkv.report.figures.cdf_points`. A panel with
no sample is left out with a note (:mod:`simkv.report.conventions`, rule 5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simkv.metrics.summary import weighted_percentiles
from simkv.report import conventions as cv
from simkv.report import figures as fg
from simkv.report.blocks import FigureBlock, figure_block

MAX_HIST_BINS = 40
"""Most bins of one histogram."""
CLIP_FACTOR = 3.0
"""A histogram's x axis ends at the 99th percentile when the maximum exceeds it this many
times; the title counts the samples beyond."""
PANEL_HEIGHT_IN = 1.9
"""Height of one small-multiple panel (inches), margins excluded."""

Panel = tuple[str, np.ndarray, Callable[[Axes, np.ndarray], None]]
"""(name, samples, draw): a panel drawn when it has samples, else named in a note."""


def _edges(values: np.ndarray) -> np.ndarray:
    """Histogram bin edges from 0 (or the minimum, when negative) to the maximum, or to the
    99th percentile when the maximum lies beyond :data:`CLIP_FACTOR` times it (so a few
    outliers do not squash the rest); one bin per integer when the integers' range allows,
    else :data:`MAX_HIST_BINS` equal bins."""
    low, high = min(0.0, float(values.min())), float(values.max())
    q99 = float(np.quantile(values, 0.99))
    if q99 > low and high > CLIP_FACTOR * q99:
        high = q99
    integral = bool(np.all(values == np.round(values)))
    if integral and high - low < MAX_HIST_BINS:
        return np.arange(low, high + 2) - 0.5
    return np.linspace(low, high if high > low else low + 1.0, MAX_HIST_BINS + 1)


def _hist(quantity: str, unit: str) -> Callable[[Axes, np.ndarray], None]:
    """A histogram panel of ``quantity`` in ``unit``; its title gives the median and maximum."""

    def draw(ax: Axes, values: np.ndarray) -> None:
        edges = _edges(values)
        counts, _ = np.histogram(values, bins=edges)
        ax.stairs(counts, edges, fill=True, alpha=0.6, color="tab:blue")
        cv.tidy_axes(ax)
        ax.set_xlabel(cv.axis_label(quantity, unit))
        ax.set_ylabel("count")
        beyond = int((values > edges[-1]).sum())
        clipped = f" ({beyond:,} beyond the axis)" if beyond else ""
        median, most = cv.compact_number(float(np.median(values))), cv.compact_number(values.max())
        ax.set_title(f"median {median} {unit}, max {most} {unit}{clipped}", loc="left")

    return draw


def _cdf(
    quantity: str, unit: str, weights: np.ndarray | None = None
) -> Callable[[Axes, np.ndarray], None]:
    """An empirical CDF panel of ``quantity`` in ``unit`` (samples weighted by ``weights``,
    default 1 each); its title gives p50 and p99."""

    def draw(ax: Axes, values: np.ndarray) -> None:
        counts = np.ones(len(values)) if weights is None else weights
        x, y = fg.cdf_points(values, counts)
        ax.plot(np.r_[x[0], x], np.r_[0.0, y], drawstyle="steps-post", linewidth=1.3)
        fg.cdf_axes(ax, x, cv.axis_label(quantity, unit))
        keep = counts > 0
        p50, p99 = weighted_percentiles(values[keep], counts[keep], [50.0, 99.0])
        ax.set_title(f"p50 {cv.compact_number(float(p50))} {unit}, "
                     f"p99 {cv.compact_number(float(p99))} {unit}", loc="left")  # fmt: skip

    return draw


def _grid(panels: Sequence[Panel]) -> cv.Drawn:
    """The panels with samples, two per row; a note for each left out."""
    shown = [p for p in panels if len(p[1]) > 0]
    notes = tuple(f"{name}: no samples in this run (panel left out)" for name, values, _ in
                  panels if len(values) == 0)  # fmt: skip
    if not shown:
        return cv.Drawn(None, notes)
    cols = min(len(shown), 2)
    rows = -(-len(shown) // cols)
    fig = Figure(figsize=(10.4, cv.panels_height(rows, PANEL_HEIGHT_IN, shared=False)))
    axes = cv.place_panels(fig, rows, cols, sharex=False)
    for ax, (_, values, draw) in zip(axes, shown, strict=False):
        draw(ax, values)
    for ax in axes[len(shown) :]:
        ax.set_visible(False)
    return cv.Drawn(fig, notes)


def step_distributions(steps: pd.DataFrame) -> cv.Drawn:
    """Batch size, batch tokens and step time per engine step; when any, the times at which
    requests were preempted (CDF over preemptions)."""
    tokens = (steps["prefill_tokens"] + steps["decode_tokens"]).to_numpy(np.float64)
    preempted = steps["preempted"].to_numpy(np.float64)
    hit = preempted > 0
    panels: list[Panel] = [
        ("batch size", steps["batch_size"].to_numpy(np.float64),
         _hist("batch size per step", "requests")),
        ("batch tokens", tokens, _hist("batch tokens per step", "tokens")),
        ("step time", steps["duration_s"].to_numpy(np.float64) * 1e3,
         _hist("step time", "ms")),
    ]  # fmt: skip
    if hit.any():
        when = _cdf("simulated time of preemption", "s", preempted[hit])
        panels.append(("time of preemption", steps["time_s"].to_numpy(np.float64)[hit], when))
    return _grid(panels)


def latency_distributions(requests: pd.DataFrame) -> cv.Drawn:
    """Queueing delay (arrival → first scheduled) of every scheduled request, and E2E latency
    per generated token of every finished request, as CDFs (ms)."""
    scheduled = requests[requests["first_scheduled_s"].notna()]
    queued_ms = (scheduled["first_scheduled_s"] - scheduled["arrival_s"]).to_numpy() * 1e3
    done = requests[(requests["status"] == "finished") & (requests["generated_tokens"] > 0)]
    e2el_ms = (done["finish_s"] - done["arrival_s"]).to_numpy() * 1e3
    per_token = e2el_ms / done["generated_tokens"].to_numpy(np.float64)
    return _grid([
        ("queueing delay", queued_ms, _cdf("queueing delay", "ms")),
        ("normalised latency", per_token,
         _cdf("E2E latency per output token", "ms/token")),
    ])  # fmt: skip


def workload_distributions(requests: pd.DataFrame) -> cv.Drawn:
    """Prompt and output lengths and inter-arrival times of every request, histograms."""
    arrivals = np.sort(requests["arrival_s"].to_numpy(np.float64))
    return _grid([
        ("prompt length", requests["prompt_tokens"].to_numpy(np.float64),
         _hist("prompt length", "tokens")),
        ("output length", requests["output_tokens"].to_numpy(np.float64),
         _hist("output length", "tokens")),
        ("inter-arrival time", np.diff(arrivals) * 1e3,
         _hist("inter-arrival time", "ms")),
    ])  # fmt: skip


def distribution_blocks(steps: pd.DataFrame, requests: pd.DataFrame) -> list[FigureBlock]:
    """The figure blocks of the report's "Distributions" section (ids ``fig-dist-*``); call
    inside ``matplotlib.rc_context(dict(figures.REPORT_RC))``."""
    return [
        figure_block(
            "fig-dist-steps", "Engine steps",
            f"Per engine step ({len(steps):,} steps): requests in the batch, tokens in the "
            "batch (prefill + decode) and step time; with preemptions, the CDF of the "
            "simulated times at which requests were preempted (each preemption counted once).",
            step_distributions(steps),
        ),
        figure_block(
            "fig-dist-latency", "Queueing delay and normalised latency",
            "CDFs over requests: queueing delay (arrival to first scheduled) of every "
            "scheduled request, and E2E latency divided by generated tokens of every finished "
            "one (the titles give p50 and p99).",
            latency_distributions(requests),
        ),
        figure_block(
            "fig-dist-workload", "Workload",
            f"Over all {len(requests):,} requests: prompt and output lengths as requested, and "
            "the times between consecutive arrivals.",
            workload_distributions(requests),
        ),
    ]  # fmt: skip
