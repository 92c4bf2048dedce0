"""The self-contained HTML comparison report of a sweep folder.

Read by :func:`simkv.report.sweep_folder.load_sweep_folder`. The page: a summary box (the answer
first: a capacity search's answer or a rate sweep's knee, then the best run among those meeting
the SLOs, the runs meeting them; :mod:`simkv.report.sweep_summary`), metric-vs-axis charts, a
heatmap for two-axis grids, the Pareto scatter (:mod:`simkv.report.sweep_figures`) and the table
of all runs, numbered (``#``) as the Pareto labels. Failed runs (``status != "ok"``) are listed
in the table and left out of every chart and conclusion. Figures are inline SVG drawn under
:data:`figures.REPORT_RC` and text goes through the report's jinja2 environment (autoescape on),
so the same folder always renders to the same bytes and the page references nothing outside
itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib as mpl
from markupsafe import Markup, escape

from simkv.metrics.slo import slo_name
from simkv.outputs import write_file
from simkv.report import figures as fg
from simkv.report import sweep_summary as sm
from simkv.report.answers import mark_answer
from simkv.report.capacity_summary import capacity_json, capacity_lines
from simkv.report.run_report import REPORT_FILE, FigureBlock, figure_block, report_environment
from simkv.report.sweep_figures import (
    LATENCY,
    THROUGHPUT,
    Marks,
    heatmap_figure,
    line_figure,
    pareto_figure,
    pareto_mask,
)
from simkv.report.sweep_folder import (
    STATUS_OK,
    SweepFolder,
    axis_value,
    is_numeric_axis,
    levels,
    load_sweep_folder,
    point_label,
    py_value,
    run_number,
    x_axis,
)
from simkv.report.sweep_table import runs_table

__all__ = ["heatmap_figure", "line_figure", "load_sweep_folder", "pareto_figure",
           "pareto_mask", "render_sweep_report", "write_sweep_report", "x_axis"]  # fmt: skip

CHART_METRICS: tuple[tuple[str, str], ...] = (
    ("request_throughput", "request throughput (req/s)"),
    ("request_goodput", "request goodput (req/s)"),
    ("p99_ttft_ms", "p99 TTFT (ms)"),
    ("p99_tpot_ms", "p99 TPOT (ms)"),
    ("p99_e2el_ms", "p99 E2EL (ms)"),
    ("prefix_hit_rate", "prefix hit rate (share of prompt tokens)"),
    ("preemptions", "preemptions"),
    ("mean_token_frac", "share of KV pool holding tokens"),
)
"""Metrics drawn against the sweep axis (column, axis label); absent or all-null ones skipped,
p99 E2EL only under an E2EL SLO, the prefix hit rate only when some run hits the cache."""
SLO_OF_METRIC = {metric: key for key, metric, _ in sm.SLO_KEYS}


def _has_values(sweep: SweepFolder, metric: str) -> bool:
    ok = sweep.ok
    if metric not in ok.columns or not ok[metric].notna().any():
        return False
    if metric == "prefix_hit_rate":
        return bool((ok[metric].astype("float64") > 0).any())
    if metric == "p99_e2el_ms":
        return bool(ok[sm.slo_column("e2el_ms")].notna().any())
    return True


def _slo_values(sweep: SweepFolder, metric: str) -> tuple[float, ...]:
    key = SLO_OF_METRIC.get(metric)
    if key is None:
        return ()
    return tuple(sorted(set(sweep.ok[sm.slo_column(key)].dropna().tolist())))


def knees(sweep: SweepFolder, x: str | None) -> list[tuple[str | None, sm.Knee]]:
    """The knee of each line of a sweep whose x axis is an offered rate (else none)."""
    if x not in sm.RATE_AXES or not is_numeric_axis(sweep.table[x]):
        return []
    ok, judge = sweep.ok, sm.has_slo(sweep.ok)
    others = [axis for axis in sweep.axes if axis != x]
    groups = ok.groupby(others, sort=False, dropna=False) if others else [((), ok)]
    out = []
    for _, rows in groups:
        name = point_label(rows.iloc[0], others) if others else None
        out.append((name, sm.knee(rows[x].to_numpy(dtype=float), rows, judge)))
    return out


def _knee_x(knee: sm.Knee, sweep: SweepFolder, x: str) -> float | None:
    """Where the knee line goes: the highest rate meeting the SLOs; without SLOs the last
    rate before p99 TTFT departs."""
    if knee.meets_up_to is not None or sm.has_slo(sweep.ok):
        return knee.meets_up_to
    if knee.departs_at is None:
        return None
    below = [v for v in levels(sweep.table[x]) if v < knee.departs_at]
    return float(below[-1]) if below else None


def knee_sentences(sweep: SweepFolder, x: str | None) -> list[str]:
    """One sentence per line of a rate sweep: the highest rate meeting the SLOs, or without
    SLOs where p99 TTFT departs."""
    out = []
    for name, knee in knees(sweep, x):
        where = f" ({name})" if name else ""
        parts = []
        if sm.has_slo(sweep.ok) and knee.meets_up_to is None:
            parts.append("no rate meets the SLOs")
        elif sm.has_slo(sweep.ok):
            parts.append(f"the highest {x} meeting the SLOs is {knee.meets_up_to:g} req/s")
        factor = f"{sm.DEPARTURE_FACTOR:g}× its value at the lowest rate"
        if sm.has_slo(sweep.ok):
            pass  # the SLOs answer; where p99 TTFT departs would be a second knee
        elif knee.departs_at is None:
            parts.append(f"p99 TTFT stays within {factor} throughout")
        else:
            parts.append(f"p99 TTFT departs (exceeds {factor}) at {knee.departs_at:g} req/s")
        out.append(f"Knee{where}: " + "; ".join(parts) + ".")
    return out


def _marks(sweep: SweepFolder, metric: str, x: str) -> Marks:
    lines = []
    for name, knee in knees(sweep, x):
        at = _knee_x(knee, sweep, x)
        if at is not None:
            lines.append((f"knee {at:g} req/s" + (f" ({name})" if name else ""), at))
    return Marks(_slo_values(sweep, metric), tuple(lines))


def _pareto_caption(sweep: SweepFolder, front: tuple[int, ...], unlabelled: tuple[str, ...]) -> str:
    on_front = ", ".join(_run_name(sweep, n - 1) for n in front)
    text = (
        "Request throughput against p99 TTFT per finished run; red: runs that no other run "
        "beats on both (higher throughput, lower latency). Numbers are the # column of the "
        f"table of all runs; on the front: {on_front}."
    )
    if unlabelled:
        text += " Too close to label apart (see the table): " + "; ".join(unlabelled) + "."
    return text


def sweep_figures(sweep: SweepFolder) -> list[FigureBlock]:
    """Every chart of the report in display order; call inside ``rc_context(REPORT_RC)``.

    Ids: ``fig-sweep-<metric>`` (line charts), ``fig-sweep-heatmap`` (two-axis grids only),
    ``fig-sweep-pareto``. Nothing is drawn without finished runs.
    """
    x = x_axis(sweep)
    blocks: list[FigureBlock] = []
    if sweep.ok.empty:
        return blocks
    others = [axis for axis in sweep.axes if axis != x]
    per_line = f", one line per value of {', '.join(others)}" if others else ""
    for metric, label in CHART_METRICS:
        if x is not None and _has_values(sweep, metric):
            marks = _marks(sweep, metric, x)
            slo = f"; dashed red: the SLO ({metric} ≤ it)" if marks.slo else ""
            knee = "; dotted: the knee (see the summary)" if marks.knees else ""
            caption = f"{metric} of the finished runs against {x}{per_line}{slo}{knee}."
            fig = line_figure(sweep, metric, label, x, marks)
            fig_id = "fig-sweep-" + metric.replace("_", "-")
            blocks.append(figure_block(fig_id, label, caption, fig))
    if len(sweep.axes) == 2 and x is not None and _has_values(sweep, LATENCY):
        caption = f"{LATENCY} per grid cell ({x} across); — marks a cell without a finished run."
        fig = heatmap_figure(sweep, LATENCY, "p99 TTFT (ms)", x)
        blocks.append(figure_block("fig-sweep-heatmap", "p99 TTFT over the grid", caption, fig))
    if _has_values(sweep, THROUGHPUT) and _has_values(sweep, LATENCY):
        pareto = pareto_figure(sweep)
        caption = _pareto_caption(sweep, pareto.front, pareto.unlabelled)
        blocks.append(figure_block("fig-sweep-pareto", "Throughput vs p99 TTFT", caption,
                                   pareto.figure))  # fmt: skip
    return blocks


def _fmt(value: Any, unit: str) -> str:
    number = py_value(value)
    if number is None:
        return "—"
    return f"{number:,.0f} {unit}" if abs(number) >= 100 else f"{number:.2f} {unit}"


def _run_name(sweep: SweepFolder, index: Any) -> str:
    return f"#{run_number(index)} ({point_label(sweep.table.loc[index], sweep.axes)})"


def failure_lines(sweep: SweepFolder) -> list[str]:
    """The failed runs, first in the summary: how many, and the first one's error and folder
    (a failed run says nothing of the SLOs, so what follows covers the finished runs only)."""
    failed = sweep.table[sweep.table["status"] != STATUS_OK]
    if failed.empty:
        return []
    first = failed.index[0]
    return [f"{len(failed)} of {len(sweep.table)} runs failed; the first, "
            f"{_run_name(sweep, first)} (runs/{failed.loc[first, 'run_id']}): "
            f"{failed.loc[first, 'error']}. Fix them and run again: the best run, the SLO "
            "count and the knee below cover the finished runs only and may change."]  # fmt: skip


def summary_lines(sweep: SweepFolder, answered: bool = False, names: bool = True) -> list[str]:
    """The summary box, the answer first: failed runs, a rate sweep's knee, the best run among
    those meeting the SLOs (by the main objective; none named when none meets them), the runs
    meeting the SLOs. ``answered``: a capacity search's folder, whose answer
    (:func:`capacity_lines`) leads instead: its runs are probes, so no best run or knee.
    ``names``: list the runs meeting the SLOs (the terminal counts them: its table marks them)."""
    ok = sweep.ok
    if ok.empty:
        return [*failure_lines(sweep), "No run finished."]
    met = ok.index[sm.meets_slo(ok).to_numpy()] if sm.has_slo(ok) else None
    if answered:
        return failure_lines(sweep) + ([] if met is None else [_met_line(sweep, met, names)])
    lines = failure_lines(sweep) + knee_sentences(sweep, x_axis(sweep))
    if met is None:
        return [*lines, "No SLO is set: " + _best_line(sweep, ok, "best by request throughput")]
    if len(met) == 0:
        return [*lines, f"No run meets the SLOs ({slo_text(sweep)}), so none is named best.",
                _met_line(sweep, met, names)]  # fmt: skip
    among = f"Best among the {len(met)} runs meeting the SLOs" if len(met) > 1 else (
        "The one run meeting the SLOs")  # fmt: skip
    return [*lines, _best_line(sweep, ok.loc[met], among), _met_line(sweep, met, names)]


def _best_line(sweep: SweepFolder, rows: Any, among: str) -> str:
    """``{among} (by {objective}): #k (point), value, p99 TTFT``: the best of ``rows``."""
    metric = sm.objective(rows)
    name = "request goodput" if metric == sm.GOODPUT else "request throughput"
    best = sm.best_row(rows, metric)
    if best is None:
        return f"{among}: none ({name} missing)."
    row = rows.loc[best]
    by = "" if "by request throughput" in among else f" (by {name})"
    return (f"{among}{by}: {_run_name(sweep, best)}, "
            f"{_fmt(row[metric], 'req/s')} {name.removeprefix('request ')}, "
            f"p99 TTFT {_fmt(row.get(LATENCY), 'ms')}.")  # fmt: skip


def _met_line(sweep: SweepFolder, met: Any, names: bool = True) -> str:
    count = f"Runs meeting the SLOs ({slo_text(sweep)}): {len(met)} of {len(sweep.ok)}"
    if not names:
        return count + "."
    runs = ", ".join(_run_name(sweep, i) for i in met) if len(met) else "none"
    return f"{count}: {runs}."


def slo_text(sweep: SweepFolder) -> str:
    """The SLOs the finished runs set, as ``p99 TTFT ≤ 2,000 ms, …`` (ranges if they differ)."""
    parts = []
    label = sm.percentile_text(sweep.ok)
    for key, _, _ in sm.SLO_KEYS:
        values = sorted(set(sweep.ok[sm.slo_column(key)].dropna().tolist()))
        if values:
            shown = f"{label} {slo_name(key).upper()}"
            parts.append(f"{shown} ≤ " + " / ".join(f"{v:,g}" for v in values) + " ms")
    return ", ".join(parts)


def render_sweep_report(sweep_dir: Path) -> str:
    """The HTML report of a sweep folder; byte-identical for identical folder contents."""
    sweep = load_sweep_folder(sweep_dir)
    with mpl.rc_context(dict(fg.REPORT_RC)):
        figure_blocks = sweep_figures(sweep)
    table = runs_table(sweep, sm.meets_slo(sweep.table) if sm.has_slo(sweep.ok) else None)
    template = report_environment().get_template("sweep.html.j2")
    return template.render(
        name=sweep.name,
        axes=[
            (axis, ", ".join(axis_value(v) for v in levels(sweep.table[axis])))
            for axis in sweep.axes
        ],
        counts=(len(sweep.table), len(sweep.ok)),
        summary=marked_headline(sweep_dir, sweep, headline(sweep_dir, sweep)),
        figures=figure_blocks,
        table=table,
    )


def headline(sweep_dir: Path, sweep: SweepFolder, names: bool = True) -> list[str]:
    """The summary box's sentences: a capacity search's answer, then :func:`summary_lines`."""
    answer = capacity_lines(sweep_dir)
    return answer + summary_lines(sweep, answered=bool(answer), names=names)


def marked_headline(sweep_dir: Path, sweep: SweepFolder, lines: list[str]) -> list[Markup]:
    """The headline with its answer's number marked (:func:`mark_answer`): a capacity search's
    ``answer_rate``, a count search's ``answer_replicas`` (capacity.json), a rate sweep's
    ``knee`` (one line only)."""
    found = capacity_json(sweep_dir) or {}
    marks: list[tuple[str, str, str]] = []  # (words before the number, number, key)
    if found.get("search") == "rate" and found.get("outcome") in ("found", "all_meet"):
        marks.append(("", f"{found['answer_rate']:g}", "answer_rate"))
    elif found.get("search") == "replicas" and found.get("outcome") in ("found", "all_meet"):
        word = "are " if found["outcome"] == "found" else "from "
        marks.append((word, str(found["answer_replicas"]), "answer_replicas"))
    elif not found:
        found_knees = knees(sweep, x_axis(sweep))
        if len(found_knees) == 1 and found_knees[0][1].meets_up_to is not None:
            marks.append(("is ", f"{found_knees[0][1].meets_up_to:g}", "knee"))
    out = [Markup(escape(line)) for line in lines]
    for after, shown, key in marks:
        for i, line in enumerate(out):  # the first line stating it
            marked = mark_answer(line, shown, key, after)
            if marked != line:
                out[i] = marked
                break
    return out


def write_sweep_report(sweep_dir: Path) -> Path:
    """Render ``sweep_dir``'s report into ``sweep_dir/report.html``; returns that path."""
    path = sweep_dir / REPORT_FILE
    write_file(path, render_sweep_report(sweep_dir))
    return path
