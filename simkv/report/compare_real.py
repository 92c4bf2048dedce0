"""A simulated run against the real run it replays: table, CSV and a self-contained HTML page.

:func:`compare_with_measured` reads a run folder (:func:`simkv.report.run_report.load_run`) and
a measurement (:func:`simkv.measured.read_measured_run`), checks that the run replays the
measured requests and computes both sides' metrics (:mod:`simkv.metrics.validation`).
:func:`write_comparison` writes ``compare.csv`` (``metric, measured, simulated, diff_pct``, full
precision, empty where missing) and ``compare.html``: the table with Diff% coloured by size,
overlaid latency CDFs and, when the measurement logged its load, running / waiting requests and
KV usage over time. Same conventions as the run report: inline SVG, inline styles, no script,
autoescaped text, the same inputs render the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd

from simkv.errors import InputError
from simkv.measured import MeasuredRun, read_measured_run
from simkv.metrics.saturation import saturation_lines
from simkv.metrics.validation import (
    ItlSamples,
    MetricRow,
    Validation,
    compare_metrics,
    latency_samples_ms,
    simulated_request_frame,
)
from simkv.outputs import make_folder, write_file
from simkv.report import compare_figures as cf
from simkv.report import figures as fg
from simkv.report.blocks import FigureBlock, figure_block, report_environment
from simkv.report.conventions import SECONDS_FROM_MS, Drawn
from simkv.report.run_folder import RunFolder, load_run

HTML_FILE, CSV_FILE = "compare.html", "compare.csv"
DIFF_LEVELS: tuple[tuple[float, str], ...] = ((5.0, "close"), (15.0, "fair"), (np.inf, "far"))
"""|Diff%| below each bound (%) → the level the table colours it with."""
_CDF_LABELS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E latency"))


@dataclass(frozen=True)
class RealComparison:
    """A run folder, the measurement it replays, and the comparison of the two."""

    run: RunFolder
    measured: MeasuredRun
    validation: Validation
    simulated_requests: pd.DataFrame
    measured_itl: ItlSamples | None
    simulated_itl: ItlSamples


def _measured_itl(run: MeasuredRun) -> ItlSamples | None:
    if run.itl_s is None:
        return None
    gaps = np.concatenate([*run.itl_s, np.empty(0)])
    return gaps, np.ones(len(gaps), np.int64)


def compare_with_measured(run_dir: Path, measured_path: Path) -> RealComparison:
    """Read both sides and compare them; :class:`InputError` for a missing or unreadable
    folder or file, and when the run is not a replay of the measurement."""
    if not run_dir.is_dir():
        raise InputError("no such run folder", file=run_dir)
    return compare_run(load_run(run_dir), measured_path)


def compare_run(run: RunFolder, measured_path: Path) -> RealComparison:
    """:func:`compare_with_measured` of a run already read (or built in memory:
    :func:`simkv.report.run_folder.run_folder_of`)."""
    measured = read_measured_run(measured_path)
    simulated = simulated_request_frame(run.frames.requests)
    itl = run.frames.itl
    sim_itl = (itl["itl_s"].to_numpy(np.float64), itl["count"].to_numpy(np.int64))
    real_itl = _measured_itl(measured)
    validation = compare_metrics(
        measured.requests, simulated, measured_itl=real_itl, simulated_itl=sim_itl
    )
    return RealComparison(run, measured, validation, simulated, real_itl, sim_itl)


def format_metric(key: str, value: float | None) -> str:
    """A metric value for display: a latency with its unit, to 0.1 ms below 10 s and to 0.01 s
    from there (the report's duration rule, :func:`simkv.report.conventions.format_ms`, at the
    precision a validation table needs); tokens/s to 0.1, req/s to 0.001, counts whole."""
    if value is None:
        return "—"
    if key == "completed":
        return f"{int(value):,}"
    if key.endswith("_ms"):
        return f"{value:,.1f} ms" if value < SECONDS_FROM_MS else f"{value / 1e3:,.2f} s"
    return f"{value:,.3f}" if key == "request_throughput" else f"{value:,.1f}"


def format_diff(diff: float | None) -> str:
    """``+0.6%``; ``—`` when there is no Diff% (measured value 0 or missing)."""
    return "—" if diff is None else f"{diff:+.1f}%"


def diff_level(diff: float | None) -> str:
    """``close`` / ``fair`` / ``far`` by |Diff%| (see :data:`DIFF_LEVELS`); ``none`` if absent."""
    if diff is None:
        return "none"
    return next(level for bound, level in DIFF_LEVELS if abs(diff) < bound)


def headline_scope(validation: Validation) -> str:
    """What the headline error is over, e.g. ``over TTFT, … (12 of 12)``."""
    return f"over TTFT, TPOT, E2E × mean, median, P90, P99 ({validation.headline_count} of 12)"


def headline_text(validation: Validation) -> str:
    """The headline error as one line: the mean |Diff%| and what it is over."""
    value = validation.mean_abs_diff_pct
    shown = "—" if value is None else f"{value:.1f}%"
    return f"Mean abs. Diff% {shown} {headline_scope(validation)}"


def validation_frame(validation: Validation) -> pd.DataFrame:
    """``metric, measured, simulated, diff_pct`` per row (NaN where missing)."""
    return pd.DataFrame(
        [(r.key, r.measured, r.simulated, r.diff_pct) for r in validation.rows],
        columns=["metric", "measured", "simulated", "diff_pct"],
    )


def write_csv(validation: Validation, path: Path) -> Path:
    """:func:`validation_frame` as CSV (empty where missing); returns path."""
    frame = validation_frame(validation)
    return write_file(path, lambda handle: frame.to_csv(handle, index=False, float_format="%.17g"))


def _ones(values_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return values_ms, np.ones(len(values_ms), np.int64)


def _cdf_block(cmp: RealComparison) -> FigureBlock:
    real = latency_samples_ms(cmp.measured.requests)
    sim = latency_samples_ms(cmp.simulated_requests)
    per_side = {key: {"measured": _ones(real[key]), "simulated": _ones(sim[key])}
                for key in real}  # fmt: skip
    if cmp.measured_itl is not None:
        itl_ms = {"measured": cmp.measured_itl, "simulated": cmp.simulated_itl}
        per_side["itl"] = {name: (gaps * 1e3, counts) for name, (gaps, counts) in itl_ms.items()}
    panels = [(label, per_side[key]) for key, label in _CDF_LABELS if key in per_side]
    return figure_block(
        "fig-latency-cdf", "Latency CDFs, measured vs simulated",
        "Empirical CDFs over completed requests (TPOT: those with more than one output token; "
        "ITL, when both sides recorded it: every inter-token gap). Log x axis where a panel's "
        "samples span two decades or more.",
        Drawn(cf.cdf_figure(panels)),
    )  # fmt: skip


def measured_load(cmp: RealComparison) -> tuple[pd.DataFrame | None, list[str], list[str]]:
    """The measured load series (``kv_usage_pct`` in %), the columns to draw, and notes."""
    series = cmp.measured.timeseries
    if series is None:
        return None, [], ["Load over time left out: the measured run has no time series."]
    frame = series[["t_s", "running", "waiting"]].assign(kv_usage_pct=series["kv_usage"] * 100)
    columns, notes = [], []
    for col, label in cf.SERIES:
        if frame[col].isna().all():
            notes.append(f"{label} over time left out: the measured run did not log it.")
        else:
            columns.append(col)
    return frame, columns, notes


def _load_block(cmp: RealComparison) -> tuple[list[FigureBlock], list[str]]:
    measured, columns, notes = measured_load(cmp)
    steps = cmp.run.frames.steps
    if measured is None or not columns:
        return [], notes
    if steps.empty:
        return [], [*notes, "Load over time left out: the simulated run has no engine steps."]
    until = float(steps["time_s"].iloc[-1] + steps["duration_s"].iloc[-1])
    ends, tick = cf.tick_grid(measured["t_s"].to_numpy(np.float64), until)
    simulated = cf.sim_ticks(steps, ends, tick)
    block = figure_block(
        "fig-load", "Load over time, measured vs simulated",
        f"Measured: the engine's stat logger, one sample per {tick:g} s tick (its clock starts "
        "within about 0.1 s of the first arrival). Simulated: the step states averaged over the "
        "same ticks, weighted by step duration; KV usage is the share of KV blocks in use.",
        Drawn(cf.load_figure(measured, simulated, columns)),
    )  # fmt: skip
    return [block], notes


def comparison_figures(cmp: RealComparison) -> tuple[list[FigureBlock], list[str]]:
    """The page's figures (ids ``fig-*``) and notes on panels left out.

    Call inside ``matplotlib.rc_context(dict(figures.REPORT_RC))``.
    """
    blocks, notes = _load_block(cmp)
    return [_cdf_block(cmp), *blocks], notes


def _setup(cmp: RealComparison) -> list[tuple[str, str]]:
    engine = cmp.measured.engine
    described = [engine.engine_version, engine.gpu, engine.model] if engine else []
    return [
        ("simulated run", f"{cmp.run.name} ({cmp.run.path})"),
        ("measured run", f"{cmp.measured.label} ({cmp.measured.source})"),
        ("measured engine", ", ".join(v for v in described if v) or "not recorded"),
        ("requests", f"{len(cmp.measured):,}"),
    ]


def table_rows(rows: tuple[MetricRow, ...]) -> list[dict[str, str]]:
    """Display rows: ``key``, ``label``, formatted ``measured``/``simulated``/``diff``, the
    Diff% ``level`` (:func:`diff_level`) and ``group`` (the latency, or ``totals``)."""
    return [
        {"key": r.key, "label": r.label, "measured": format_metric(r.key, r.measured),
         "simulated": format_metric(r.key, r.simulated), "diff": format_diff(r.diff_pct),
         "level": diff_level(r.diff_pct),
         "group": r.key.split("_")[1] if r.key.endswith("_ms") else "totals"}
        for r in rows
    ]  # fmt: skip


def _saturation_cards(validation: Validation) -> list[dict[str, str]]:
    """Headline cards of the requests before and after the measured run saturated (none when
    it is not in overload)."""
    split = validation.saturation
    if split is None or split.before is None or split.after is None:
        return []
    return [
        {"id": f"{key}-saturation", "label": f"Mean abs. Diff%, {key} saturation",
         "value": "—" if part.mean_abs_diff_pct is None else f"{part.mean_abs_diff_pct:.1f}%",
         "note": f"the {part.requests:,} requests arriving {key} the measured queue last drained"}
        for key, part in (("before", split.before), ("after", split.after))
    ]  # fmt: skip


def render_comparison(cmp: RealComparison) -> str:
    """The HTML page of a comparison; the same inputs give the same bytes."""
    with mpl.rc_context(dict(fg.REPORT_RC)):
        figures, figure_notes = comparison_figures(cmp)
    template = report_environment().get_template("compare_real.html.j2")
    split = cmp.validation.saturation
    return template.render(
        name=cmp.run.name,
        measured_label=cmp.measured.label,
        setup=_setup(cmp),
        headline=headline_scope(cmp.validation),
        headline_value=cmp.validation.mean_abs_diff_pct,
        parts=_saturation_cards(cmp.validation),
        saturation=[] if split is None else saturation_lines(split),
        rows=table_rows(cmp.validation.rows),
        notes=[*cmp.validation.notes, *cmp.measured.notes, *figure_notes],
        figures=figures,
    )


def write_comparison(cmp: RealComparison, html_path: Path, csv_path: Path) -> list[Path]:
    """Write the page and the CSV (creating their folders); returns both paths."""
    for path in (html_path, csv_path):
        make_folder(path.parent)
    write_file(html_path, render_comparison(cmp))
    return [html_path, write_csv(cmp.validation, csv_path)]
