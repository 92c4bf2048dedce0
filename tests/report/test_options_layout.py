"""The GPU-options page of a real ``--options`` search (quickstart, shrunk), measured in headless
Chromium at a 1280 px window as the sweep reports are (:mod:`tests.report.test_sweep_layout`):
no console error or network request, no two texts of the chart overlap, nothing wider than the
window; its headline states the answer of ``capacity.json``, and every cost carries the
currency."""

from __future__ import annotations

import json
from itertools import combinations
from typing import Any

import pytest

from simkv.capacity.replicas import CountOptions, find_cheapest
from simkv.config.fleet_options import FleetOptions
from simkv.report.conventions import money
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
    with chromium_tab(work / "profile", TIMEOUT_S) as tab:
        events = tab.open(page)
        measured = json.loads(tab.value(MEASURE_JS))
        read = json.loads(tab.value(READ_JS))
    answer = json.loads((work / "fleets" / "capacity.json").read_text())
    return {"answer": answer, "measured": measured, "read": read,
            "problems": page_problems(events)}  # fmt: skip


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
