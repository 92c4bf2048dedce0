"""The GPU-options page of a real ``--options`` search (quickstart, shrunk) and a curve page
(``--at-rate 8,16,32``, its answers scaled from that search's), measured in headless Chromium at
a 1280 px window as the sweep reports are (:mod:`tests.report.test_sweep_layout`): no console
error or network request, no two texts of a chart overlap, nothing wider than the window; the
headline states the answer of ``capacity.json``, and every cost carries the currency."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from simkv.capacity.replicas import CountOptions, find_cheapest
from simkv.config.fleet_options import FleetOptions
from simkv.report.conventions import money
from simkv.report.curve_report import render_curve_report
from simkv.report.options_report import write_options_report
from tests.conftest import ROOT
from tests.report.chromium import chromium_tab, page_problems, require_chromium
from tests.report.costs import bare_costs, cost_cells
from tests.report.test_sweep_layout import MEASURE_JS, TIMEOUT_S, _overlap

READ_JS = r"""JSON.stringify({
  headline: document.getElementById("options-headline").innerText,
  text: document.body.innerText,
  tables: Array.from(document.querySelectorAll("table")).map(t =>
    Array.from(t.rows).map(r => Array.from(r.cells).map(c => c.innerText.trim()))),
})"""
"""What the reader sees: the headline, the page's text and every table's cells."""


@pytest.fixture(scope="module")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fleets folder's capacity.json, and what the browser measured and read on its page."""
    require_chromium()
    work = tmp_path_factory.mktemp("options")
    options = FleetOptions.model_validate({"currency": "EUR", "options": [
        {"name": "a100", "price_per_gpu_hour": 1.8, "set": ["gpu=a100-80gb"]},
        {"name": "a100-tp2", "price_per_gpu_hour": 1.8,
         "set": ["gpu=a100-80gb", "parallel.tensor_parallel=2"]},
        {"name": "h100", "price_per_gpu_hour": 3.2, "set": ["gpu=h100-80gb"]},
    ]})  # fmt: skip
    config = ROOT / "configs" / "quickstart.yaml"
    find_cheapest(config, ["workload.limit=200"], work / "fleets",
                  CountOptions(at_rate=16.0, count_max=8), options)  # fmt: skip
    page = write_options_report(work / "fleets")
    answer = json.loads((work / "fleets" / "capacity.json").read_text())
    curve = _curve(work / "curve", answer)
    with chromium_tab(work / "profile", TIMEOUT_S) as tab:
        events = tab.open(page)
        measured = json.loads(tab.value(MEASURE_JS))
        read = json.loads(tab.value(READ_JS))
        curve_events = tab.open(curve)
        curve_measured = json.loads(tab.value(MEASURE_JS))
        curve_read = json.loads(tab.value(READ_JS.replace("options-headline", "curve-summary")))
    return {"answer": answer, "measured": measured, "read": read,
            "problems": page_problems(events), "curve": curve_measured,
            "curve_read": curve_read, "curve_problems": page_problems(curve_events)}  # fmt: skip


def _curve(folder: Path, fleets: dict[str, Any]) -> Path:
    """The curve page of three target rates whose answers are the real search's at 16 req/s,
    scaled (as ``--at-rate 8,16,32`` would write its capacity.json)."""
    points = []
    for scale in (0.5, 1.0, 2.0):
        rows = [{"name": r["name"], "outcome": r["outcome"], "tensor_parallel":
                 r["tensor_parallel"], "replicas": None if r["replicas"] is None else
                 max(1, round(r["replicas"] * scale)), "gpus": None, "cost_per_hour": None}
                for r in fleets["options"]]  # fmt: skip
        for row, option in zip(rows, fleets["options"], strict=True):
            if row["replicas"] is not None:
                row["gpus"] = row["replicas"] * row["tensor_parallel"]
                row["cost_per_hour"] = row["gpus"] * option["price_per_gpu_hour"]
        best = min((r for r in rows if r["gpus"]), key=lambda r: r["cost_per_hour"])
        points.append({"at_rate": 16 * scale, "folder": f"at-{16 * scale:g}",
                       "cheapest": best["name"], "rows": rows})  # fmt: skip
    folder.mkdir()
    (folder / "capacity.json").write_text(json.dumps({
        "search": "curve", "rates": [p["at_rate"] for p in points], "count_min": 1,
        "count_max": 8, "outcome": "found", "currency": "EUR", "simulations": 0,
        "options": [r["name"] for r in fleets["options"]], "points": points}))  # fmt: skip
    path = folder / "options.html"
    path.write_text(render_curve_report(folder))
    return path


def test_the_page_opens_cleanly(fleets: dict[str, Any]) -> None:
    assert fleets["problems"] == []
    page = fleets["measured"]
    assert page["scroll_width"] <= page["client_width"]
    assert len(page["tables"]) == 2
    for table_id, left, _, right, _ in page["tables"]:
        assert left >= 0 and right <= page["client_width"], table_id


def test_no_text_overlaps_in_the_chart(fleets: dict[str, Any]) -> None:
    (svg,) = fleets["measured"]["svgs"]
    assert svg["texts"], "no text measured"
    clashes = [f"{a[0]!r} overlaps {b[0]!r}" for a, b in combinations(svg["texts"], 2)
               if _overlap(a[1:], b[1:])]  # fmt: skip
    left, top, right, bottom = svg["box"]
    clashes += [f"{text!r} is cut off" for text, *box in svg["texts"]
                if box[0] < left - 1 or box[1] < top - 1 or box[2] > right + 1
                or box[3] > bottom + 1]  # fmt: skip
    assert clashes == []


def test_the_headline_is_the_answer(fleets: dict[str, Any]) -> None:
    answer = fleets["answer"]
    assert answer["outcome"] == "found" and answer["currency"] == "EUR"
    best = next(row for row in answer["options"] if row["name"] == answer["cheapest"])
    headline = fleets["read"]["headline"]
    assert headline.startswith(f"Cheapest fleet meeting the SLOs at 16 req/s: {best['name']}, ")
    assert f"{money(best['cost_per_hour'], 'EUR')} per hour" in headline
    assert f"= {best['gpus']} GPU" in headline


def test_every_cost_carries_the_currency(fleets: dict[str, Any]) -> None:
    read = fleets["read"]
    assert bare_costs(read["tables"], read["text"], "EUR") == []
    answered = sum(row["replicas"] is not None for row in fleets["answer"]["options"])
    assert cost_cells(read["tables"], "EUR") >= 3 + 3 * answered  # prices; cost, 2 × per M


def test_the_curve_page(fleets: dict[str, Any]) -> None:
    """GPUs against target rate: opens cleanly, no overlapping text, every cost in euros."""
    assert fleets["curve_problems"] == []
    page = fleets["curve"]
    assert page["scroll_width"] <= page["client_width"] and len(page["tables"]) == 1
    (svg,) = page["svgs"]
    assert [(a[0], b[0]) for a, b in combinations(svg["texts"], 2) if _overlap(a[1:], b[1:])] == []
    read = fleets["curve_read"]
    assert bare_costs([], read["text"], "EUR") == []
    cells = [cell for row in read["tables"][0][1:] for cell in row[1:] if "GPU" in cell]
    assert cells and all("€" in cell for cell in cells)
