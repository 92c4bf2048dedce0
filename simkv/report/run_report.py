"""The self-contained HTML report of a run folder.

A report is rebuilt from the files :func:`simkv.run.write_run` leaves in a run folder
(``requests/steps/itl.parquet``, ``summary.json``, ``config.resolved.yaml``), never from live
objects, so it can be regenerated later. The HTML has no external references: figures are
inline SVG (see :mod:`simkv.report.figures`, drawn to :mod:`simkv.report.conventions`), styles
are inline, there is no script. Text goes through jinja2 with autoescaping on. The same folder
always renders to the same bytes. Several runs side by side: :mod:`simkv.report.compare_runs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import pandas as pd

from simkv.metrics.files import FrameFormat
from simkv.metrics.slo import SLO_KEYS, slo_name
from simkv.metrics.trace import write_trace
from simkv.outputs import write_file
from simkv.report import figures as fg
from simkv.report import fleet_figures as ff
from simkv.report import time_figures as tf
from simkv.report.answers import marked_verdict
from simkv.report.blocks import (
    CDF_CAPTION,
    Card,
    FigureBlock,
    bins_note,
    describe_setup,
    figure_block,
    format_value,
    latency_samples,
    report_environment,
)
from simkv.report.cache_figures import hit_split, prefix_cache_figure
from simkv.report.compare_runs import render_comparison_report
from simkv.report.conventions import Drawn, format_ms
from simkv.report.disagg_figures import disagg_cards, disagg_figure_blocks
from simkv.report.distribution_figures import distribution_blocks
from simkv.report.replica_table import replica_headers, replica_rows
from simkv.report.run_folder import RunFolder, load_run
from simkv.report.tier_figures import tier_cards, tier_figure_blocks
from simkv.report.verdict import verdict_lines

if TYPE_CHECKING:
    from simkv.run import RunOutput

__all__ = [
    "RunFolder", "format_ms", "load_run", "render_comparison_report", "render_run_report",
    "write_run_folder", "write_run_report",
]  # fmt: skip

REPORT_FILE = "report.html"
METRIC_NOTES = {
    "prefix_hit_rate": "prompt tokens found cached at each request's first admission "
    "(prefixes shared with earlier requests)",
    "prefill_tokens_saved": "every cache hit, re-admissions after preemption included",
    "mean_cached_blocks": "blocks holding a cached hash, in use or free (every full block is "
    "registered)",
}
"""What a summary metric counts, where its name alone misleads; shown beside its value."""


def _slo_note(config: dict[str, Any]) -> str:
    slo = config.get("slo") or {}
    parts = [f"{slo_name(k).upper()} ≤ {slo[k]:g} ms" for k, _, _ in SLO_KEYS if slo.get(k)]
    return "SLO " + ", ".join(parts) if parts else "no SLO set"


def summary_cards(run: RunFolder) -> list[Card]:
    """The headline cards, in display order; ids are ``card-<metric>``."""
    summary, config = run.summary, run.config
    s = summary.get
    reasons = _reasons(run.frames.requests)

    def rate(key: str, unit: str) -> tuple[tuple[str, str], ...]:
        value = s(key)
        if value is None:
            return (("", "—"),)
        return (("", f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"),)

    def pcts(metric: str) -> tuple[tuple[str, str], ...]:
        p50, p99 = s(f"median_{metric}_ms"), s(f"p99_{metric}_ms")
        return (("p50", format_ms(p50)), ("p99", format_ms(p99)))

    swap = s("swap_gib")
    of_requests = f"of {format_value(s('num_requests'))} requests{reasons}"
    return [
        Card("card-request-throughput", "Request throughput", rate("request_throughput", "req/s")),
        Card("card-output-throughput", "Output throughput", rate("output_throughput", "tok/s")),
        Card("card-goodput", "Goodput", rate("request_goodput", "req/s"), _slo_note(config)),
        Card("card-ttft", "TTFT", pcts("ttft"), "time to first token"),
        Card("card-tpot", "TPOT", pcts("tpot"), "time per output token"),
        Card("card-e2el", "E2EL", pcts("e2el"), "end-to-end latency"),
        Card("card-preemptions", "Preemptions", (("", format_value(s("preemptions"))),)),
        Card("card-swap", "Swap traffic", (("", "—" if swap is None else f"{swap:.3g} GiB"),)),
        Card("card-rejected", "Rejected", (("", format_value(s("rejected"))),), of_requests),
        Card("card-aborted", "Aborted", (("", format_value(s("aborted"))),)),
        *_cache_cards(run),
        *_fleet_cards(run),
        *disagg_cards(run),
        *tier_cards(run),
    ]


def _fleet_cards(run: RunFolder) -> list[Card]:
    """Fleet cards, for a run with ``fleet:``: replicas and router, load imbalance."""
    fleet = run.config.get("fleet")
    if not isinstance(fleet, dict):
        return []
    s = run.summary.get
    router = (fleet.get("router") or {}).get("kind", "?")
    stale = fleet.get("staleness_ms") or 0
    imbalance, cv = s("outstanding_imbalance"), s("outstanding_cv")
    return [
        Card("card-replicas", "Replicas", (("", format_value(s("num_replicas"))),),
             f"router {router}; " + (f"loads refreshed every {stale:g} ms" if stale
                                      else "live loads")),
        Card("card-imbalance", "Load imbalance",
             (("max/mean", "—" if imbalance is None else f"{imbalance:.3f}"),
              ("CV", "—" if cv is None else f"{cv:.3f}")),
             "time-averaged outstanding requests per replica"),
    ]  # fmt: skip


def _reasons(requests: pd.DataFrame) -> str:
    """``: 416 prompt_too_long`` — the rejected requests counted by reason, most first."""
    rejected = requests.loc[requests["status"] == "rejected"]
    if "reason" not in rejected or rejected.empty:
        return ""
    counts = rejected["reason"].fillna("unknown").value_counts(sort=False)
    order = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    return ": " + ", ".join(f"{n:,} {reason}" for reason, n in order)


def _cache_cards(run: RunFolder) -> list[Card]:
    """Prefix-cache cards, when the run cached prefixes."""
    policy = (run.config.get("kv_cache") or {}).get("prefix_caching") or "none"
    if policy == "none":
        return []
    s = run.summary.get
    first, again = hit_split(run.frames.requests)

    def pct(key: str) -> str:
        value = s(key)
        return "—" if value is None else f"{value:.1%}"

    return [
        Card("card-prefix-hits", "Prefix hits", (("tokens", pct("prefix_hit_rate")),
             ("requests", pct("prefix_hit_request_rate"))),
             f"{policy} prefix cache; at first admissions"),
        Card("card-prefill-saved", "Prefill saved",
             (("", format_value(s("prefill_tokens_saved"))),),
             f"tokens: {first:,} from shared prefixes, {again:,} re-hit after preemption "
             f"(recompute); {format_value(s('evictions'))} evictions"),
    ]  # fmt: skip


def run_figures(run: RunFolder) -> list[FigureBlock]:
    """Every figure of a run report, in display order (ids ``fig-*``).

    Call inside ``matplotlib.rc_context(dict(figures.REPORT_RC))``.
    """
    steps, requests = run.frames.steps, run.frames.requests
    binned, coarse = fg.bin_steps(steps), fg.bin_steps(steps, fg.THROUGHPUT_BINS)
    s = run.summary
    block_bytes = int(s.get("kv_block_bytes") or 0)
    pool_bytes = int(s.get("kv_num_blocks") or 0) * block_bytes
    slo = run.config.get("slo") or {}
    return [
        figure_block(
            "fig-latency-cdf", "Latency CDFs", CDF_CAPTION,
            fg.latency_cdf_figure([(run.name, latency_samples(run.frames))], slo),
        ),
        figure_block(
            "fig-throughput", "Throughput against offered load",
            "Prefill and decode tokens per second with the prompt tokens arriving per second "
            "(dashed: the offered prefill load), requests arriving vs finishing per second, "
            f"and the duration-weighted batch size ({bins_note(coarse, steps)}). Finishing "
            "below arriving for long means the engine is saturated and the queue grows.",
            tf.throughput_figure(coarse, requests),
        ),
        figure_block(
            "fig-kv-memory", "KV memory over time",
            "The KV pool by category in % of the pool, duration-weighted per bin "
            f"({bins_note(binned, steps)}).",
            tf.kv_memory_figure(binned, pool_bytes),
        ),
        figure_block(
            "fig-waste-breakdown", "Waste breakdown",
            "Time-averaged share of the KV pool per category (summary mean_*_frac).",
            Drawn(fg.waste_bar_figure([(run.name, s)])),
        ),
        figure_block(
            "fig-queues", "Queues, preemptions and swaps",
            "Waiting and running requests (and swapped, when any were); cumulative "
            f"preemptions and swap traffic when there were any ({bins_note(binned, steps)}).",
            tf.queue_figure(binned, block_bytes),
        ),
        *_cache_figures(run, binned, steps),
        *_fleet_figures(run),
        *disagg_figure_blocks(run, coarse),
        *tier_figure_blocks(run, coarse),
    ]  # fmt: skip


def _fleet_figures(run: RunFolder) -> list[FigureBlock]:
    if run.replicas is None:
        return []
    return [
        figure_block(
            "fig-fleet-time", "Fleet: replicas over time",
            "Each replica's KV pool in use (% of its own pool) and waiting requests, "
            f"duration-weighted per bin ({ff.FLEET_BINS} equal bins; beyond {ff.MAX_LINES} "
            "replicas, the min, median and max over replicas). The figures above are over all "
            "replicas' steps together.",
            ff.fleet_time_figure(run.frames.steps, run.replicas),
        ),
        figure_block(
            "fig-fleet-routing", "Fleet: routing and load per replica",
            "Requests the router sent to each replica, its time-averaged outstanding requests "
            "(summary outstanding_imbalance is their max/mean) and its prefix-cache hit rate "
            "(prompt tokens cached at first admission)."
            + (" Bars by role: prefill orange, decode blue." if "role" in run.replicas else ""),
            ff.routing_figure(run.replicas),
        ),
    ]  # fmt: skip


def _cache_figures(run: RunFolder, binned: pd.DataFrame, steps: pd.DataFrame) -> list[FigureBlock]:
    kv = run.config.get("kv_cache") or {}
    if (kv.get("prefix_caching") or "none") == "none":
        return []
    return [
        figure_block(
            "fig-prefix-cache", "Prefix cache",
            "Blocks holding cached content (every full block is registered, so this counts "
            "retained blocks, in use or free, not sharing) and blocks in use; prefill tokens "
            "saved, split into prefixes shared with earlier requests and a request's own "
            "blocks re-hit when it is re-admitted after a preemption; cumulative evictions "
            f"({bins_note(binned, steps)}).",
            prefix_cache_figure(binned, run.frames.requests, int(kv.get("block_size") or 1)),
        ),
    ]  # fmt: skip


def render_run_report(run_dir: Path) -> str:
    """The HTML report of one run folder; byte-identical for identical folder contents."""
    run = load_run(run_dir)
    with mpl.rc_context(dict(fg.REPORT_RC)):
        figure_blocks = run_figures(run)
        distributions = distribution_blocks(run.frames.steps, run.frames.requests)
    template = report_environment().get_template("run.html.j2")
    return template.render(
        name=run.name,
        setup=describe_setup(run),
        cards=summary_cards(run),
        verdict=marked_verdict(
            verdict_lines(run.summary, run.config.get("slo") or {}), run.summary
        ),
        replica_headers=replica_headers(run.replicas),
        replica_rows=(
            [] if run.replicas is None else replica_rows(run.frames.requests, run.replicas)
        ),
        roles=run.replicas is not None and "role" in run.replicas.columns,
        figures=figure_blocks,
        distributions=distributions,
        config_text=run.config_text,
        summary_rows=[
            (key, format_value(value, key), METRIC_NOTES.get(key, ""))
            for key, value in run.summary.items()
        ],
    )


def write_run_report(run_dir: Path) -> Path:
    """Render ``run_dir``'s report into ``run_dir/report.html``; returns that path."""
    path = run_dir / REPORT_FILE
    write_file(path, render_run_report(run_dir))
    return path


def write_run_folder(
    result: RunOutput, folder: Path, fmt: FrameFormat = FrameFormat.parquet, trace: bool = False
) -> list[Path]:
    """A run folder as ``simkv run`` leaves it (and ``Run.report`` of the Python API): the
    run's files (:func:`simkv.run.write_run`), ``trace.json`` when ``trace``, then
    ``report.html`` rebuilt from those files; returns the paths written."""
    from simkv.run import write_run  # the engine stack: a report rebuilt from files needs none

    paths = write_run(result, folder, fmt)
    if trace:
        paths.append(write_trace(folder, result.frames))
    paths.append(write_run_report(folder))
    return paths
