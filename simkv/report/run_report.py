"""The self-contained HTML report of a run folder, and of several runs side by side.

A report is rebuilt from the files :func:`simkv.runner.write_run` leaves in a run folder
(``requests/steps/itl.parquet``, ``summary.json``, ``config.resolved.yaml``), never from live
objects, so it can be regenerated later. The HTML has no external references: figures are
inline SVG (see :mod:`simkv.report.figures`), styles are inline, there is no script. Text goes
through jinja2 with autoescaping on. The same folder always renders to the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from matplotlib.figure import Figure

from simkv.errors import InputError
from simkv.metrics.recorder import RunFrames
from simkv.report import figures as fg
from simkv.report.cache_figures import prefix_cache_figure
from simkv.report.run_folder import RunFolder, load_run

__all__ = ["RunFolder", "load_run", "render_comparison_report", "write_run_report"]

REPORT_FILE = "report.html"
_CDF_CAPTION = (
    "Empirical CDFs of TTFT, TPOT and E2EL over finished requests (TPOT: those with more than "
    "one output token) and of ITL over every inter-token gap."
)


@dataclass(frozen=True)
class Card:
    """A summary card: stable ``id``, a label and one or more (key, formatted value) rows."""

    id: str
    label: str
    rows: tuple[tuple[str, str], ...]
    note: str = ""


@dataclass(frozen=True)
class FigureBlock:
    """One ``<figure>`` of the report: element id, heading, caption and the inline SVG."""

    id: str
    title: str
    caption: str
    svg: Markup


def latency_samples(frames: RunFrames) -> fg.LatencySamples:
    """TTFT, TPOT and E2EL of finished requests (one sample each) and weighted ITL, in ms.

    Same definitions as :mod:`simkv.metrics.summary`: TPOT only for requests that generated
    more than one token.
    """
    req = frames.requests
    done = req[req["status"] == "finished"]
    multi = done[done["generated_tokens"] > 1]
    decode_ms = (multi["finish_s"] - multi["first_token_s"]) * 1e3
    per_request = {
        "ttft": (done["first_token_s"] - done["arrival_s"]) * 1e3,
        "tpot": decode_ms / (multi["generated_tokens"] - 1),
        "e2el": (done["finish_s"] - done["arrival_s"]) * 1e3,
    }
    out = {k: (v.to_numpy(), np.ones(len(v), dtype=np.int64)) for k, v in per_request.items()}
    out["itl"] = (frames.itl["itl_s"].to_numpy() * 1e3, frames.itl["count"].to_numpy())
    return out


def format_ms(value: float | None) -> str:
    """``186 ms`` below a second, ``7.21 s`` above; ``—`` for a missing value."""
    if value is None:
        return "—"
    return f"{value:.3g} ms" if value < 1000 else f"{value / 1000:.3g} s"


def format_value(value: object) -> str:
    """A summary value for a table cell: ints with separators, floats to 6 significant digits."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.6g}"


def _slo_note(config: dict[str, Any]) -> str:
    slo = config.get("slo") or {}
    parts = [f"{k.removesuffix('_ms').upper()} ≤ {v:g} ms" for k, v in slo.items() if v]
    return "SLO " + ", ".join(parts) if parts else "no SLO set"


def summary_cards(summary: dict[str, Any], config: dict[str, Any]) -> list[Card]:
    """The headline cards, in display order; ids are ``card-<metric>``."""
    s = summary.get

    def rate(key: str, unit: str) -> tuple[tuple[str, str], ...]:
        value = s(key)
        if value is None:
            return (("", "—"),)
        return (("", f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"),)

    def pcts(metric: str) -> tuple[tuple[str, str], ...]:
        p50, p99 = s(f"median_{metric}_ms"), s(f"p99_{metric}_ms")
        return (("p50", format_ms(p50)), ("p99", format_ms(p99)))

    swap = s("swap_gib")
    of_requests = f"of {format_value(s('num_requests'))} requests"
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
        *_cache_cards(summary, config),
    ]


def _cache_cards(summary: dict[str, Any], config: dict[str, Any]) -> list[Card]:
    """Prefix-cache cards, when the run cached prefixes."""
    policy = (config.get("kv_cache") or {}).get("prefix_caching") or "none"
    if policy == "none":
        return []
    s = summary.get

    def pct(key: str) -> str:
        value = s(key)
        return "—" if value is None else f"{value:.1%}"

    return [
        Card("card-prefix-hits", "Prefix hits", (("tokens", pct("prefix_hit_rate")),
             ("requests", pct("prefix_hit_request_rate"))), f"{policy} prefix cache"),
        Card("card-prefill-saved", "Prefill saved",
             (("", format_value(s("prefill_tokens_saved"))),),
             f"tokens; {format_value(s('evictions'))} evictions"),
    ]  # fmt: skip


def describe_setup(run: RunFolder) -> list[tuple[str, str]]:
    """(label, text) pairs naming the scheduler, model, GPU, KV pool and workload of a run."""
    c, s = run.config, run.summary
    work = c.get("workload") or {}
    kv = c.get("kv_cache") or {}
    blocks = s.get("kv_num_blocks")
    pool = "—" if blocks is None else f"{blocks:,} blocks × {kv.get('block_size', '?')} tokens"
    tp = (c.get("parallel") or {}).get("tensor_parallel", 1)
    return [
        ("scheduler", str((c.get("scheduler") or {}).get("kind", "—"))),
        ("model", str((c.get("model") or {}).get("name", "—"))),
        ("gpu", f"{(c.get('gpu') or {}).get('name', '—')} × {tp}"),
        ("KV pool", pool),
        ("workload", " ".join(str(v) for v in (work.get("kind"), work.get("path")) if v)),
    ]


def figure_block(fig_id: str, title: str, caption: str, fig: Figure) -> FigureBlock:
    # matplotlib escapes every text it writes into the SVG, so the markup is safe to inline
    return FigureBlock(fig_id, title, caption, Markup(fg.svg_of(fig, fig_id)))


def _bins_note(binned: pd.DataFrame, steps: pd.DataFrame) -> str:
    return f"{len(binned):,} time bins over {len(steps):,} engine steps"


def run_figures(run: RunFolder) -> list[FigureBlock]:
    """Every figure of a run report, in display order (ids ``fig-*``).

    Call inside ``matplotlib.rc_context(dict(figures.REPORT_RC))``.
    """
    steps = run.frames.steps
    binned, coarse = fg.bin_steps(steps), fg.bin_steps(steps, fg.THROUGHPUT_BINS)
    block_bytes = int(run.summary.get("kv_block_bytes") or 0)
    samples = latency_samples(run.frames)
    return [
        figure_block(
            "fig-latency-cdf", "Latency CDFs", _CDF_CAPTION,
            fg.latency_cdf_figure([(run.name, samples)]),
        ),
        figure_block(
            "fig-throughput", "Throughput and batch size",
            "Prefill and decode tokens per second and the duration-weighted batch size "
            f"({_bins_note(coarse, steps)}).",
            fg.throughput_figure(coarse),
        ),
        figure_block(
            "fig-kv-memory", "KV memory over time",
            f"Token slots of the KV pool by category, duration-weighted per bin "
            f"({_bins_note(binned, steps)}).",
            fg.kv_memory_figure(binned),
        ),
        figure_block(
            "fig-waste-breakdown", "Waste breakdown",
            "Time-averaged share of the KV pool per category (summary mean_*_frac).",
            fg.waste_bar_figure([(run.name, run.summary)]),
        ),
        figure_block(
            "fig-queues", "Queues, preemptions and swaps",
            "Waiting, running and swapped requests; cumulative preemptions and swap traffic "
            f"({_bins_note(binned, steps)}).",
            fg.queue_figure(binned, block_bytes),
        ),
        *_cache_figures(run, binned, steps),
    ]  # fmt: skip


def _cache_figures(run: RunFolder, binned: pd.DataFrame, steps: pd.DataFrame) -> list[FigureBlock]:
    kv = run.config.get("kv_cache") or {}
    if (kv.get("prefix_caching") or "none") == "none":
        return []
    return [
        figure_block(
            "fig-prefix-cache", "Prefix cache",
            "Cached blocks and blocks saved by sharing (several requests on one block); "
            f"cumulative prefix-hit tokens and evictions ({_bins_note(binned, steps)}).",
            prefix_cache_figure(binned, int(kv.get("block_size") or 1)),
        ),
    ]  # fmt: skip


def comparison_figures(labels: list[str], runs: list[RunFolder]) -> list[FigureBlock]:
    """The figures of a comparison report, one series per run (ids ``fig-cmp-*``)."""
    named = list(zip(labels, runs, strict=True))
    return [
        figure_block(
            "fig-cmp-latency-cdf", "Latency CDFs", _CDF_CAPTION + " One line per run.",
            fg.latency_cdf_figure([(name, latency_samples(r.frames)) for name, r in named]),
        ),
        figure_block(
            "fig-cmp-kv-usage", "KV usage over time",
            "Share of each run's KV pool in use (blocks; token slots for contiguous "
            "schedulers), duration-weighted per time bin.",
            fg.kv_usage_figure([(name, fg.bin_steps(r.frames.steps)) for name, r in named]),
        ),
        figure_block(
            "fig-cmp-waste-breakdown", "Waste breakdown",
            "Time-averaged share of each run's KV pool per category.",
            fg.waste_bar_figure([(name, r.summary) for name, r in named]),
        ),
    ]  # fmt: skip


def report_environment() -> Environment:
    return Environment(
        loader=PackageLoader("simkv.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_run_report(run_dir: Path) -> str:
    """The HTML report of one run folder; byte-identical for identical folder contents."""
    run = load_run(run_dir)
    with mpl.rc_context(dict(fg.REPORT_RC)):
        figure_blocks = run_figures(run)
    template = report_environment().get_template("run.html.j2")
    return template.render(
        name=run.name,
        setup=describe_setup(run),
        cards=summary_cards(run.summary, run.config),
        figures=figure_blocks,
        config_text=run.config_text,
        summary_rows=[(key, format_value(value)) for key, value in run.summary.items()],
    )


def write_run_report(run_dir: Path) -> Path:
    """Render ``run_dir``'s report into ``run_dir/report.html``; returns that path."""
    path = run_dir / REPORT_FILE
    path.write_text(render_run_report(run_dir), encoding="utf-8")
    return path


def _labels(runs: list[RunFolder]) -> list[str]:
    """Run names; folder-qualified, then numbered, when names collide."""
    for labels in ([r.name for r in runs], [f"{r.name} ({r.path.name})" for r in runs]):
        if len(set(labels)) == len(labels):
            return labels
    return [f"{i}. {r.name}" for i, r in enumerate(runs, start=1)]


def render_comparison_report(run_dirs: list[Path]) -> str:
    """Several runs side by side: setup and summary tables, overlaid CDFs, KV usage, waste."""
    if not run_dirs:
        raise InputError("no run folders to compare")
    runs = [load_run(path) for path in run_dirs]
    labels = _labels(runs)
    keys = list(dict.fromkeys(key for run in runs for key in run.summary))
    with mpl.rc_context(dict(fg.REPORT_RC)):
        figure_blocks = comparison_figures(labels, runs)
    template = report_environment().get_template("compare.html.j2")
    return template.render(
        labels=labels,
        setups=[describe_setup(run) for run in runs],
        summary_rows=[(k, [format_value(r.summary.get(k)) for r in runs]) for k in keys],
        figures=figure_blocks,
        configs=list(zip(labels, [run.config_text for run in runs], strict=True)),
    )
