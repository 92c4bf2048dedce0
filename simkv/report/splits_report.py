"""The split-search page of ``simkv capacity --gpus N`` / ``--budget-per-hour B``:
``<out>/splits.html``.

Rendered from the folder's ``splits.json`` alone (:mod:`simkv.capacity.splits`), self-contained
like every report (the sweep report's page shell, inline SVG drawn under
:data:`figures.REPORT_RC`), so the same folder renders to the same bytes. The page: the
headline naming the answer (the best split, its goodput per GPU and per cost, its factor over
the best colocated fleet), goodput against the split with the SLO-passing region marked
(:mod:`simkv.report.splits_figures`), and every split at its answer, each name linking to the
split's own sweep report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib as mpl

from simkv.errors import InputError
from simkv.outputs import published_name, write_file
from simkv.report import figures as fg
from simkv.report.blocks import figure_block, report_environment
from simkv.report.conventions import money, money_unit
from simkv.report.run_report import REPORT_FILE
from simkv.report.splits_figures import SplitBar, splits_figure
from simkv.text import parse_json, read_text

SPLITS_PAGE = "splits.html"
"""The page's name in the split-search folder."""
SPLITS_FILE = "splits.json"
"""The search's answers (:data:`simkv.capacity.splits.SPLITS_FILE`, read here by name)."""
Cell = tuple[str, bool]
"""A table cell: its text and whether it is a number (right-aligned)."""


def _num(value: float | None, prefix: str = "") -> str:
    return "—" if value is None else f"{prefix}{value:.3g}"


def _label(row: dict[str, Any], tp: bool) -> str:
    """``p:d`` (with ``tp``: ``p×tpT:d×tpT``); ``colocated n`` (``n×tpT``)."""
    tp_p, tp_d = row["tp_prefill"], row["tp_decode"]
    if row["colocated"]:
        return f"colocated {row['decode_replicas']}" + (f"×tp{tp_d}" if tp else "")
    if not tp:
        return f"{row['prefill_replicas']}:{row['decode_replicas']}"
    return f"{row['prefill_replicas']}×tp{tp_p}:{row['decode_replicas']}×tp{tp_d}"


def headline(splits: dict[str, Any]) -> str:
    """The answer in one sentence: the best split, its goodput per GPU (and per cost), its
    factor over the best colocated fleet."""
    rows = {row["name"]: row for row in splits["splits"]}
    top = rows.get(splits["best"] or "")
    if top is None:
        return (f"No split meets the SLOs: none of the {len(rows)} splits met them even at "
                f"{splits['rate_min']:g} req/s.")  # fmt: skip
    unit = money_unit(splits.get("currency", "USD"))
    kind = "the colocated fleet" if top["colocated"] else (
        f"{top['prefill_replicas']} prefill × TP {top['tp_prefill']} + "
        f"{top['decode_replicas']} decode × TP {top['tp_decode']}")  # fmt: skip
    cost = ("" if top["goodput_per_cost"] is None
            else f", {top['goodput_per_cost']:.3g} req/s per {unit}/h")  # fmt: skip
    factor = splits.get("over_colocated")
    than = ("" if factor is None else
            f"; {factor:.2f}× the best colocated fleet's {_ranked_unit(splits, unit)}")  # fmt: skip
    return (f"Best split: {top['name']} ({kind}) serves {top['answer_rate']:.3g} req/s within "
            f"the SLOs on {top['gpus']} GPUs: {top['goodput_per_gpu']:.3g} req/s per GPU"
            f"{cost}{than}.")  # fmt: skip


def _ranked_unit(splits: dict[str, Any], unit: str) -> str:
    return f"req/s per {unit}/h" if splits["ranked_by"] == "goodput_per_cost" else "req/s per GPU"


def _facts(splits: dict[str, Any]) -> list[tuple[str, str]]:
    cur = splits.get("currency", "USD")
    prices = splits.get("price_per_gpu_hour")
    facts = [("GPUs", "any" if splits["gpus"] is None else str(splits["gpus"])),
             ("budget per hour", money(splits.get("budget_per_hour"), cur))]  # fmt: skip
    if prices is not None:
        same = prices["prefill"] == prices["decode"]
        one, other = money(prices["prefill"], cur), money(prices["decode"], cur)
        text = one if same else f"{one} prefill, {other} decode"
        facts.append(("price per GPU-hour", text))
    for side in ("prefill", "decode"):
        if splits.get(f"tp_{side}") is not None:
            facts.append((f"TP {side}", ", ".join(map(str, splits[f"tp_{side}"]))))
    facts += [("splits", str(len(splits["splits"]))),
              ("ranked by", splits["ranked_by"].replace("_", " "))]  # fmt: skip
    return facts


def table(splits: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The header, then per split: link, cells (replicas × TP per side, GPUs, [cost], req/s,
    per GPU, [per cost], outcome), whether it meets the SLOs, whether it is the best."""
    cur = splits.get("currency", "USD")
    priced = splits.get("price_per_gpu_hour") is not None
    unit = money_unit(cur)
    header = ["prefill", "decode", "GPUs", *([f"{unit}/h"] if priced else []), "req/s",
              "req/s per GPU", *([f"req/s per {unit}/h"] if priced else []), "outcome"]  # fmt: skip
    rows = []
    for row in splits["splits"]:
        floor = "≥" if row["outcome"] == "all_meet" else ""
        cells: list[Cell] = [
            ("—" if row["colocated"] else f"{row['prefill_replicas']} × TP {row['tp_prefill']}",
             not row["colocated"]),
            (f"{row['decode_replicas']} × TP {row['tp_decode']}", True),
            (str(row["gpus"]), True),
            *([(money(row["cost_per_hour"], cur), True)] if priced else []),
            (_num(row["answer_rate"], floor), True),
            (_num(row["goodput_per_gpu"]), True),
            *([(_num(row["goodput_per_cost"]), True)] if priced else []),
            (row["outcome"].replace("_", " "), False),
        ]  # fmt: skip
        rows.append({"name": row["name"], "href": f"{row['name']}/{REPORT_FILE}",
                     "cells": cells, "meets": row["meets"],
                     "best": row["name"] == splits["best"]})  # fmt: skip
    return header, rows


def render_splits_report(folder: Path) -> str:
    """The split-search page of ``folder``; byte-identical for identical folder contents."""
    path = folder / SPLITS_FILE
    splits = parse_json(read_text(path), path)
    if not isinstance(splits, dict) or splits.get("search") != "splits":
        raise InputError("expected the splits.json of a split search", file=path)
    currency = splits.get("currency", "USD")
    priced = splits.get("price_per_gpu_hour") is not None
    tp = any(row["tp_prefill"] != 1 or row["tp_decode"] != 1 for row in splits["splits"])
    bars = [SplitBar(_label(row, tp), row["colocated"], row["goodput_per_gpu"],
                     row["goodput_per_cost"], row["name"] == splits["best"])
            for row in splits["splits"]]  # fmt: skip
    unit = money_unit(currency)
    with mpl.rc_context(dict(fg.REPORT_RC)):
        drawn = splits_figure(bars, unit if priced else None)
        caption = ("Each split's goodput at its answer (the highest rate meeting the SLOs): per "
                   "GPU" + (f" (top) and per {unit}/h (bottom)" if priced else "") + ". Green "
                   "band: the split meets the SLOs at some rate searched; grey with ×: it "
                   "meets none; hatched: colocated; the star: the best split.")  # fmt: skip
        figure = figure_block("fig-splits-goodput", "Goodput against the split", caption, drawn)
    header, rows = table(splits)
    return report_environment().get_template("splits.html.j2").render(
        name=published_name(folder), facts=_facts(splits), headline=headline(splits),
        figure=figure, header=header, rows=rows, priced=priced, currency=currency,
        rate_min=splits["rate_min"], rate_max=splits["rate_max"],
    )  # fmt: skip


def write_splits_report(folder: Path) -> Path:
    """Render ``folder``'s split-search page into ``folder/splits.html``; returns it."""
    path = folder / SPLITS_PAGE
    write_file(path, render_splits_report(folder))
    return path
