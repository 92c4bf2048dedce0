"""Several runs side by side (``simkv report RUN_A RUN_B …``): headline cards with deltas, the
config keys that differ, overlaid figures, and every summary metric.

The first run is the baseline: each other run's card shows its value, the difference from the
baseline (absolute and %) and, for metrics with a direction (:data:`HEADLINES`), whether that
is better or worse. Same folders, same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl

from simkv.errors import InputError
from simkv.report import figures as fg
from simkv.report import time_figures as tf
from simkv.report.blocks import (
    CDF_CAPTION,
    FigureBlock,
    describe_setup,
    figure_block,
    format_value,
    latency_samples,
    report_environment,
)
from simkv.report.conventions import Drawn, format_ms
from simkv.report.run_folder import RunFolder, load_run

HEADLINES: tuple[tuple[str, str, str, int], ...] = (
    ("request_goodput", "Goodput", "req/s", +1),
    ("request_throughput", "Request throughput", "req/s", +1),
    ("output_throughput", "Output throughput", "tok/s", +1),
    ("median_ttft_ms", "TTFT p50", "ms", -1),
    ("p99_ttft_ms", "TTFT p99", "ms", -1),
    ("median_tpot_ms", "TPOT p50", "ms", -1),
    ("p99_tpot_ms", "TPOT p99", "ms", -1),
    ("p99_e2el_ms", "E2EL p99", "ms", -1),
    ("preemptions", "Preemptions", "", -1),
    ("rejected", "Rejected", "", -1),
    ("swap_gib", "Swap traffic", "GiB", -1),
    ("mean_kv_usage", "Mean KV usage", "%", 0),
)
"""(summary key, card label, unit, direction: +1 higher is better, -1 lower is better, 0
neither) of each comparison card, in display order."""


@dataclass(frozen=True)
class Entry:
    """One run's value on a comparison card; ``delta`` and ``verdict`` (better / worse / same /
    changed) are empty for the baseline."""

    label: str
    value: str
    delta: str = ""
    verdict: str = ""


@dataclass(frozen=True)
class CompareCard:
    id: str
    label: str
    entries: tuple[Entry, ...]


def _show(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "ms":
        return format_ms(value)
    if unit == "%":
        return f"{value * 100:.1f} %"
    text = f"{value:,.0f}" if abs(value) >= 100 or float(value).is_integer() else f"{value:.3g}"
    return f"{text} {unit}".strip()


def _delta(base: float, value: float, unit: str, direction: int) -> tuple[str, str]:
    """The difference as shown (``+1.91 s (+14%)``) and its verdict; values that display
    the same are ``same`` (a difference below the shown precision is noise, not news)."""
    diff = value - base
    if _show(value, unit) == _show(base, unit):
        return "±0 as shown", "same"
    if unit == "ms":
        text = format_ms(abs(diff))
    elif unit == "%":
        text = f"{abs(diff) * 100:.1f} pts"
    else:
        text = _show(abs(diff), unit)
    text = ("+" if diff > 0 else "−") + text
    if base != 0:
        rel = diff / abs(base)
        text += f" ({rel:+.1%})" if abs(rel) < 0.1 else f" ({rel:+.0%})"
    verdict = "changed" if direction == 0 else "better" if diff * direction > 0 else "worse"
    return text.replace("-", "−"), verdict


def compare_cards(labels: list[str], runs: list[RunFolder]) -> list[CompareCard]:
    """A card per :data:`HEADLINES` metric any run has, ids ``cmp-card-<metric>``."""
    cards = []
    for key, title, unit, direction in HEADLINES:
        values = [run.summary.get(key) for run in runs]
        if all(v is None for v in values):
            continue
        base = values[0]
        entries = [Entry(labels[0], _show(base, unit))]
        for label, value in zip(labels[1:], values[1:], strict=True):
            delta, verdict = ("", "")
            if base is not None and value is not None:
                delta, verdict = _delta(float(base), float(value), unit, direction)
            entries.append(Entry(label, _show(value, unit), delta, verdict))
        cards.append(CompareCard(f"cmp-card-{key.replace('_', '-')}", title, tuple(entries)))
    return cards


def flatten(config: Any, prefix: str = "") -> dict[str, str]:
    """A nested config as ``dotted.key → value text`` (lists and scalars as YAML-like text)."""
    if isinstance(config, dict):
        out: dict[str, str] = {}
        for key, value in config.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out if out or not prefix else {prefix[:-1]: "{}"}
    if config is None:
        return {prefix[:-1]: "null"}
    return {prefix[:-1]: str(config).lower() if isinstance(config, bool) else str(config)}


def config_diff(runs: list[RunFolder]) -> list[tuple[str, list[str]]]:
    """(key, value in each run) for every resolved-config key whose values differ
    (``—``: the run's config has no such key), in the first run's key order."""
    flat = [flatten(run.config) for run in runs]
    keys = list(dict.fromkeys(key for f in flat for key in f))
    rows = [(key, [f.get(key, "—") for f in flat]) for key in keys]
    return [(key, values) for key, values in rows if len(set(values)) > 1]


def _labels(runs: list[RunFolder]) -> list[str]:
    """Run names; folder-qualified, then numbered, when names collide."""
    for labels in ([r.name for r in runs], [f"{r.name} ({r.path.name})" for r in runs]):
        if len(set(labels)) == len(labels):
            return labels
    return [f"{i}. {r.name}" for i, r in enumerate(runs, start=1)]


def _shared_slo(runs: list[RunFolder]) -> dict[str, Any]:
    slos = [run.config.get("slo") or {} for run in runs]
    return slos[0] if all(slo == slos[0] for slo in slos) else {}


def comparison_figures(labels: list[str], runs: list[RunFolder]) -> list[FigureBlock]:
    """The figures of a comparison report, one series per run (ids ``fig-cmp-*``)."""
    named = list(zip(labels, runs, strict=True))
    coarse = [(name, fg.bin_steps(r.frames.steps, fg.THROUGHPUT_BINS), r.frames.requests)
              for name, r in named]  # fmt: skip
    slo = _shared_slo(runs)
    return [
        figure_block(
            "fig-cmp-latency-cdf", "Latency CDFs",
            CDF_CAPTION + " One line per run" + ("" if slo else "; no SLO line: the runs' SLOs "
                                                 "differ or are unset") + ".",
            fg.latency_cdf_figure([(name, latency_samples(r.frames)) for name, r in named], slo),
        ),
        figure_block(
            "fig-cmp-throughput", "Throughput and queues over time",
            "Per run: decode tokens per second, requests finishing per second (dashed: "
            "arriving), and waiting and running requests; "
            f"{fg.THROUGHPUT_BINS} time bins at most per run.",
            tf.compare_time_figure(coarse),
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
            Drawn(fg.waste_bar_figure([(name, r.summary) for name, r in named])),
        ),
    ]  # fmt: skip


def render_comparison_report(run_dirs: list[Path]) -> str:
    """Several runs side by side: cards with deltas from the first run, the config keys that
    differ, overlaid figures, setup and summary tables, resolved configs."""
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
        cards=compare_cards(labels, runs),
        config_diff=config_diff(runs),
        setups=[describe_setup(run) for run in runs],
        summary_rows=[(k, [format_value(r.summary.get(k), k) for r in runs]) for k in keys],
        figures=figure_blocks,
        configs=list(zip(labels, [run.config_text for run in runs], strict=True)),
    )
