"""The GPU-options page of ``simkv capacity --at-rate R --options FILE``: ``<out>/options.html``.

Rendered from the fleets folder's files alone (``capacity.json`` and each option's own
``capacity.json`` for the SLOs), self-contained like every report (the sweep report's page
shell, inline SVG drawn under :data:`figures.REPORT_RC`), so the same folder renders to the same
bytes. The page: the headline (the cheapest option meeting the SLOs, the sentence the options'
sweep reports lead with, :func:`simkv.report.capacity_summary.fleet_lines`), the options at
their answers, the planner's units (:mod:`simkv.capacity.options`), the cost against p99
chart (:mod:`simkv.report.options_figures`) and the formulas. Each option's name links to its
own sweep report. Every cost is written by :func:`simkv.report.conventions.money`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib as mpl

from simkv.config.fleet_options import DEFAULT_CURRENCY
from simkv.errors import InputError
from simkv.metrics.slo import SLO_KEYS, slo_name
from simkv.outputs import published_name, write_file
from simkv.report import figures as fg
from simkv.report.blocks import figure_block, report_environment
from simkv.report.capacity_summary import fleet_lines
from simkv.report.conventions import format_ms, money, money_unit
from simkv.report.options_figures import OptionPoint, options_figure
from simkv.report.run_report import REPORT_FILE
from simkv.text import parse_json, read_text

OPTIONS_FILE = "options.html"
"""The page's name in the fleets folder."""
CAPACITY_FILE = "capacity.json"
"""The searches' answers (:data:`simkv.capacity.run.CAPACITY_FILE`; the report layer reads
them by name, as :mod:`simkv.report.capacity_summary` does)."""
Cell = tuple[str, bool]
"""A table cell: its text and whether it is a number (right-aligned)."""


def read_answer(path: Path) -> dict[str, Any]:
    """A search's ``capacity.json`` (:class:`InputError` when it is not a JSON object)."""
    data = parse_json(read_text(path), path)
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", file=path)
    return data


def _slo(fleets_dir: Path, fleets: dict[str, Any]) -> dict[str, Any]:
    """The options' SLOs (one config, so the first option's search states them)."""
    for row in fleets["options"]:
        path = fleets_dir / row["folder"] / CAPACITY_FILE
        if path.is_file():
            return read_answer(path).get("slo") or {}
    return {}


def percent(value: float | None) -> str:
    """``62 %``; ``—`` for a missing share."""
    return "—" if value is None else f"{100 * value:.0f} %"


def _num(value: float | None, digits: str = ".3g") -> str:
    return "—" if value is None else format(value, digits)


def answer_rows(fleets: dict[str, Any]) -> list[dict[str, Any]]:
    """Per option: link, then (text, numeric) cells of replicas, GPUs, price, cost per hour,
    req/s, p99 TTFT, p99 TPOT and its marks."""
    cur = fleets.get("currency", DEFAULT_CURRENCY)
    rows = []
    for row in fleets["options"]:
        marks = [m for m, on in (("cheapest", row["cheapest"]), ("Pareto", row["pareto"])) if on]
        answered = row["replicas"] is not None
        cells: list[Cell] = [
            (str(row["replicas"]) if answered else "none meets", answered),
            (_num(row["gpus"], "d") if answered else "—", True),
            (money(row["price_per_gpu_hour"], cur), True),
            (money(row["cost_per_hour"], cur), True),
            (_num(row["request_throughput"]), True),
            (format_ms(row["p99_ttft_ms"]), True),
            (format_ms(row["p99_tpot_ms"]), True),
            (", ".join(marks) or ("run failed" if row["outcome"] == "failed" else ""), False),
        ]
        rows.append({"name": row["name"], "href": f"{row['folder']}/{REPORT_FILE}",
                     "cells": cells, "best": row["cheapest"]})  # fmt: skip
    return rows


def unit_rows(fleets: dict[str, Any], slo: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """The planner's units per answered option: the headers, then rows as :func:`answer_rows`."""
    cur = fleets.get("currency", DEFAULT_CURRENCY)
    unit = money_unit(cur)
    keys = [slo_name(key) for key, _, _ in SLO_KEYS if slo.get(key) is not None]
    header = [f"{unit} per M output tokens", f"{unit} per M tokens", "req/s per GPU",
              f"req/s per {unit}/h", "MFU", "busiest replica busy", "busy-time headroom",
              *(f"{name.upper()} margin" for name in keys), "binding SLO"]  # fmt: skip
    rows = []
    for row in fleets["options"]:
        if row["replicas"] is None:
            continue
        margins = row.get("slo_margins") or {}
        cells: list[Cell] = [
            (money(row.get("cost_per_m_output_tokens"), cur), True),
            (money(row.get("cost_per_m_total_tokens"), cur), True),
            (_num(row.get("requests_per_gpu")), True),
            (_num(row.get("requests_per_cost")), True),
            (percent(row.get("mfu_frac")), True),
            (percent(row.get("max_busy_frac")), True),
            (percent(row.get("busy_headroom_frac")), True),
            *((percent(margins.get(name)), True) for name in keys),
            ((row.get("binding_slo") or "—").upper(), False),
        ]
        rows.append({"name": row["name"], "href": f"{row['folder']}/{REPORT_FILE}",
                     "cells": cells, "best": row["cheapest"]})  # fmt: skip
    return header, rows


def _points(fleets: dict[str, Any]) -> list[OptionPoint]:
    points = []
    for row in fleets["options"]:
        if row["replicas"] is not None:
            p99s = {"p99_ttft_ms": row["p99_ttft_ms"], "p99_tpot_ms": row["p99_tpot_ms"]}
            points.append(OptionPoint(row["name"], row["cost_per_hour"], p99s,
                                      bool(row["pareto"]), bool(row["cheapest"])))  # fmt: skip
    return points


def render_options_report(fleets_dir: Path) -> str:
    """The options page of a fleets folder; byte-identical for identical folder contents."""
    fleets = read_answer(fleets_dir / CAPACITY_FILE)
    slo = _slo(fleets_dir, fleets)
    currency = fleets.get("currency", DEFAULT_CURRENCY)
    with mpl.rc_context(dict(fg.REPORT_RC)):
        drawn = options_figure(_points(fleets), currency, slo)
        unit = money_unit(currency)
        caption = (f"Each option's fleet at its answer: cost per hour ({unit}/h) against p99 "
                   "TTFT (left) and p99 TPOT (right); red: the Pareto front, the star: "
                   "the cheapest meeting the SLOs; dashed red: the SLO.")  # fmt: skip
        figure = figure_block("fig-options-cost", "Cost against p99", caption, drawn)
    units_header, units = unit_rows(fleets, slo)
    lines = fleet_lines(fleets)
    return report_environment().get_template("options.html.j2").render(
        name=published_name(fleets_dir), fleets=fleets, currency=currency, unit=unit,
        headline=lines[0], answers=answer_rows(fleets), units_header=units_header,
        units=units, figure=figure,
    )  # fmt: skip


def write_options_report(fleets_dir: Path) -> Path:
    """Render ``fleets_dir``'s options page into ``fleets_dir/options.html``; returns it."""
    path = fleets_dir / OPTIONS_FILE
    write_file(path, render_options_report(fleets_dir))
    return path
