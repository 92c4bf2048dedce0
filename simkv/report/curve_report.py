"""The page of ``simkv capacity --at-rate 4,8,16``: GPUs (and with ``--options`` cost per
hour) needed against target rate, one line per option; ``<out>/options.html`` with options,
``<out>/replicas.html`` without.

Rendered from the curve folder's ``capacity.json`` (``search: curve``,
:mod:`simkv.capacity.curve`) alone, self-contained and byte-stable as every report. The page:
one answer per rate (the cheapest option meeting the SLOs there, or the fewest replicas), the
table of GPUs (and cost per hour) per rate and option, each rate linking to its own page
(``at-<rate>/options.html``, or the replica search's ``at-<rate>/report.html``), and the chart
(:func:`simkv.report.options_figures.curve_figure`). :func:`write_curve_report` also writes
every rate's own pages (:mod:`simkv.report.options_report`, the sweep reports).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib as mpl

from simkv.outputs import published_name, write_file
from simkv.report import figures as fg
from simkv.report.blocks import figure_block, report_environment
from simkv.report.conventions import money
from simkv.report.options_figures import OptionCurve, curve_figure
from simkv.report.options_report import (
    CAPACITY_FILE,
    OPTIONS_FILE,
    read_answer,
    write_options_report,
)
from simkv.report.run_report import REPORT_FILE
from simkv.report.sweep_report import write_sweep_report

REPLICAS_FILE = "replicas.html"
"""The curve's page without options."""


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _cell(row: dict[str, Any], currency: str | None) -> str:
    """``3 GPUs, $6.00/h``; ``none meets`` / ``run failed`` without an answer."""
    if row["replicas"] is None:
        return "run failed" if row["outcome"] == "failed" else "none meets"
    gpus = _count(row["gpus"], "GPU")
    return gpus if currency is None else f"{gpus}, {money(row['cost_per_hour'], currency)}/h"


def _answer(point: dict[str, Any], currency: str | None) -> str:
    """The rate's answer as a sentence."""
    rate, rows = f"{point['at_rate']:g} req/s", point["rows"]
    if any(row["outcome"] == "failed" for row in rows):
        return f"At {rate}: no answer: a run failed (see its page)."
    if currency is None:
        row = rows[0]
        if row["replicas"] is None:
            return f"At {rate}: no count searched meets the SLOs."
        return (f"At {rate}: {_count(row['replicas'], 'replica')} × TP{row['tensor_parallel']} "
                f"= {_count(row['gpus'], 'GPU')} meet the SLOs.")  # fmt: skip
    best = next((row for row in rows if row["name"] == point["cheapest"]), None)
    if best is None:
        return f"At {rate}: no option meets the SLOs."
    return (f"At {rate}: the cheapest fleet meeting the SLOs is {best['name']}, "
            f"{_count(best['replicas'], 'replica')} × TP{best['tensor_parallel']} = "
            f"{_count(best['gpus'], 'GPU')}, {money(best['cost_per_hour'], currency)} per "
            "hour.")  # fmt: skip


def _curves(curve: dict[str, Any]) -> list[OptionCurve]:
    names = [row["name"] for row in curve["points"][0]["rows"]] if curve["points"] else []
    out = []
    for k, name in enumerate(names):
        rows = [p["rows"][k] for p in curve["points"]]
        out.append(OptionCurve(name, tuple(p["at_rate"] for p in curve["points"]),
                               tuple(r["gpus"] for r in rows),
                               tuple(r["cost_per_hour"] for r in rows)))  # fmt: skip
    return out


def render_curve_report(curve_dir: Path) -> str:
    """The curve's page; byte-identical for identical folder contents."""
    curve = read_answer(curve_dir / CAPACITY_FILE)
    currency = curve.get("currency")
    with mpl.rc_context(dict(fg.REPORT_RC)):
        drawn = curve_figure(_curves(curve), currency)
        what = "GPUs and cost per hour" if currency else "GPUs"
        caption = (f"{what} of each option's fewest replicas meeting the SLOs, against the "
                   "target rate; a gap: no count searched meets them at that rate.")  # fmt: skip
        figure = figure_block("fig-curve", "GPUs against target rate", caption, drawn)
    page = OPTIONS_FILE if currency else REPORT_FILE
    rows = [{"rate": f"{p['at_rate']:g}", "href": f"{p['folder']}/{page}",
             "cells": [(_cell(r, currency), r["name"] == p["cheapest"]) for r in p["rows"]]}
            for p in curve["points"]]  # fmt: skip
    names = [row.name for row in _curves(curve)]
    return report_environment().get_template("curve.html.j2").render(
        name=published_name(curve_dir), curve=curve, currency=currency, names=names,
        rates=", ".join(f"{rate:g}" for rate in curve["rates"]),
        answers=[_answer(p, currency) for p in curve["points"]], rows=rows, figure=figure,
    )  # fmt: skip


def write_curve_report(curve_dir: Path) -> list[Path]:
    """Every rate's pages (each option's sweep report and the options page, or the replica
    search's report), then the curve's page; returns the curve's page and each rate's."""
    curve = read_answer(curve_dir / CAPACITY_FILE)
    pages = []
    for point in curve["points"]:
        folder = curve_dir / point["folder"]
        if curve.get("currency") is None:
            pages.append(write_sweep_report(folder))
            continue
        for row in point["rows"]:
            write_sweep_report(folder / row["name"])
        pages.append(write_options_report(folder))
    path = curve_dir / (OPTIONS_FILE if curve.get("currency") else REPLICAS_FILE)
    write_file(path, render_curve_report(curve_dir))
    return [path, *pages]
