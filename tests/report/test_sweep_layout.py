"""Every shipped sweep's report, measured in headless Chromium at a 1280 px window.

Each sweep file under ``configs/sweeps/`` is run shrunk (its own axes, a few dozen requests
per run: :data:`SHRINK`), and a capacity search's folder (``simkv capacity`` on the quickstart,
shrunk) and an option's replica-count folder (``--at-rate --options``) too; each report is
opened in one browser session. On every page: no two text boxes of one SVG overlap (matplotlib
writes each text as a ``<g id="…text_N">`` group of glyph paths, preceded by a comment holding
the text; plain ``<text>`` elements count too), every text box lies inside its SVG, the
document is no wider than the window and every table's box lies inside the page; no legend
covers a plotted line and no table cell wraps a word (:mod:`tests.report.page_checks`); the
headline's answer (capacity, fewest replicas, knee) is the summary file's; no console error or
network request.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from simkv.capacity.replicas import CountOptions, find_cheapest
from simkv.capacity.run import CapacityOptions, find_capacity
from simkv.config.fleet_options import FleetOptions
from simkv.report.sweep_report import write_sweep_report
from simkv.sweep.run import run_sweep
from tests.conftest import ROOT
from tests.report.chromium import chromium_tab, page_problems, require_chromium
from tests.report.costs import PER_HOUR, bare_costs, cost_cells, page_text, table_cells
from tests.report.page_checks import ANSWERS_JS, LEGEND_JS, WRAP_JS, shown_number

SWEEPS = sorted((ROOT / "configs" / "sweeps").glob("*.yaml"))
PAGES = [*(sweep.stem for sweep in SWEEPS), "capacity", "fleets"]
SHRINK = ("workload.limit=24",)
"""Overrides appended to every shipped sweep: enough requests for every chart, cheap runs."""
TOLERANCE_PX = 0.5
"""Boxes may touch or share this much (anti-aliasing), no more."""
MEASURE_JS = r"""JSON.stringify((() => {
  const root = document.documentElement;
  const page = {scroll_width: root.scrollWidth, client_width: root.clientWidth};
  const box = e => { const r = e.getBoundingClientRect();
                     return [r.left, r.top, r.right, r.bottom]; };
  const label = e => e.tagName.toLowerCase() === "text" ? e.textContent :
    Array.from(e.childNodes).filter(n => n.nodeType === 8).map(n => n.data.trim()).join(" ");
  page.tables = Array.from(document.querySelectorAll("table")).map(t => [t.id, ...box(t)]);
  page.svgs = Array.from(document.querySelectorAll("svg")).map(svg => ({
    id: (svg.closest("figure") || {id: "?"}).id, box: box(svg),
    texts: Array.from(svg.querySelectorAll("text, g[id]"))
      .filter(e => e.tagName.toLowerCase() === "text" || /(^|-)text_\d+$/.test(e.id))
      .map(e => [label(e), ...box(e)])
      .filter(([, l, t, r, b]) => r - l > 0 && b - t > 0),
  }));
  return page;
})())"""


def _shrunk(sweep: Path, folder: Path) -> Path:
    """A copy of ``sweep`` in ``folder`` with an absolute base and :data:`SHRINK` appended."""
    data = yaml.safe_load(sweep.read_text(encoding="utf-8"))
    if isinstance(data["base"], str):
        data["base"] = str((sweep.parent / data["base"]).resolve())
    data["overrides"] = [*data.get("overrides", []), *SHRINK]
    path = folder / sweep.name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


TIMEOUT_S = 60.0  # a DevTools read waiting this long for the browser gives up (hang guard)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Sweep file stem → what the browser measured on its report."""
    require_chromium()
    work = tmp_path_factory.mktemp("sweeps")
    pages = {}
    for sweep in SWEEPS:
        result = run_sweep(_shrunk(sweep, work), work / sweep.stem)
        assert result.failed == 0, result.table["error"].dropna().tolist()
        pages[sweep.stem] = write_sweep_report(result.out_dir)
    capacity = find_capacity(
        ROOT / "configs" / "quickstart.yaml",
        ["workload.limit=200"],
        work / "capacity",
        CapacityOptions(rate_min=0.5, rate_max=16.0, tolerance=0.2),
    )
    pages["capacity"] = write_sweep_report(capacity.out_dir)  # fmt: skip
    options = FleetOptions.model_validate({"options": [
        {"name": "a100", "price_per_gpu_hour": 2.0, "set": ["gpu=a100-80gb"]},
        {"name": "h100", "price_per_gpu_hour": 3.5, "set": ["gpu=h100-80gb"]},
    ]})  # fmt: skip
    fleets = find_cheapest(
        ROOT / "configs" / "quickstart.yaml",
        ["workload.limit=200"],
        work / "fleets",
        CountOptions(at_rate=16.0, count_max=8),
        options,
    )
    pages["fleets"] = write_sweep_report(fleets[0].out_dir)  # an option's count search
    out = {}
    with chromium_tab(work / "profile", TIMEOUT_S) as tab:
        for stem, page in pages.items():
            events = tab.open(page)
            out[stem] = json.loads(tab.value(MEASURE_JS))
            out[stem]["problems"] = page_problems(events)
            out[stem]["html"] = page.read_text(encoding="utf-8")
            out[stem]["legends"] = json.loads(tab.value(LEGEND_JS))
            out[stem]["wraps"] = json.loads(tab.value(WRAP_JS))
            out[stem]["answers"] = json.loads(tab.value(ANSWERS_JS))
            out[stem]["folder"] = str(page.parent)
    return out


def _overlap(a: list[float], b: list[float]) -> bool:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return width > TOLERANCE_PX and height > TOLERANCE_PX


def test_every_shipped_sweep_is_measured(measured: dict[str, dict[str, Any]]) -> None:
    assert sorted(measured) == sorted(PAGES)
    assert {"block_size_x_preemption", "gpu_memory", "prefix_cache", "rate",
            "schedulers"} <= set(measured)  # fmt: skip
    for stem, page in measured.items():
        assert page["problems"] == [], stem
        assert any(svg["texts"] for svg in page["svgs"]), f"{stem}: no text measured"


@pytest.mark.parametrize("stem", PAGES)
def test_no_text_overlaps(measured: dict[str, dict[str, Any]], stem: str) -> None:
    clashes = []
    for svg in measured[stem]["svgs"]:
        for a, b in combinations(svg["texts"], 2):
            if _overlap(a[1:], b[1:]):
                clashes.append(f"{svg['id']}: {a[0]!r} overlaps {b[0]!r}")
        left, top, right, bottom = svg["box"]
        for text, *box in svg["texts"]:
            inside = box[0] >= left - 1 and box[1] >= top - 1
            if not (inside and box[2] <= right + 1 and box[3] <= bottom + 1):
                clashes.append(f"{svg['id']}: {text!r} is cut off at the figure's edge")
    assert clashes == [], f"{stem}: " + "; ".join(clashes[:12])


@pytest.mark.parametrize("stem", PAGES)
def test_nothing_wider_than_the_window(measured: dict[str, dict[str, Any]], stem: str) -> None:
    page = measured[stem]
    width = page["client_width"]
    assert page["scroll_width"] <= width, f"{stem}: page {page['scroll_width']} px wide > {width}"
    assert page["tables"], f"{stem}: no table"
    for table_id, left, _, right, _ in page["tables"]:
        assert left >= 0 and right <= width, f"{stem}: table {table_id} spans {left}–{right} px"


@pytest.mark.parametrize("stem", PAGES)
def test_no_legend_covers_a_line_and_no_cell_wraps_a_word(
    measured: dict[str, dict[str, Any]], stem: str
) -> None:
    assert measured[stem]["legends"] == [], stem
    assert measured[stem]["wraps"] == [], stem


def _knee(folder: Path) -> float | None:
    """The rate sweep's knee from its table, by definition: the highest rate at and below
    which every run meets both SLOs at p99 (the shipped rate sweep's SLOs)."""
    table = pd.read_parquet(folder / "sweep.parquet").sort_values("workload.rate")
    slo = yaml.safe_load((ROOT / "configs" / "sweeps" / "rate.yaml").read_text())["overrides"]
    limits = dict(item.split("=") for item in slo if item.startswith("slo."))
    meets = (table["p99_ttft_ms"] <= float(limits["slo.ttft_ms"])) & (
        table["p99_tpot_ms"] <= float(limits["slo.tpot_ms"])
    )
    failing = np.flatnonzero(~meets.to_numpy())
    last = (failing[0] if failing.size else len(table)) - 1
    return float(table["workload.rate"].iloc[last]) if last >= 0 else None


@pytest.mark.parametrize(
    ("stem", "key"), [("capacity", "answer_rate"), ("fleets", "answer_replicas"), ("rate", "knee")]
)
def test_the_headline_states_the_summary_files_answer(
    measured: dict[str, dict[str, Any]], stem: str, key: str
) -> None:
    """The number marked in the headline is the one in capacity.json (or, for a rate
    sweep's knee, the one its table gives by the knee's definition)."""
    folder = Path(measured[stem]["folder"])
    shown = [text for k, text in measured[stem]["answers"] if k == key]
    assert len(shown) == 1, measured[stem]["answers"]
    if key == "knee":
        expected = _knee(folder)
    else:
        expected = json.loads((folder / "capacity.json").read_text(encoding="utf-8"))[key]
    assert expected is not None and shown_number(shown[0]) == pytest.approx(expected)


@pytest.mark.parametrize("stem", PAGES)
def test_every_cost_carries_the_currency(measured: dict[str, dict[str, Any]], stem: str) -> None:
    """Costs appear on an option's count-search page (each option's cost per hour in its
    answer lines): each names the options file's currency (here the default, USD)."""
    page = measured[stem]["html"]
    tables, text = table_cells(page), page_text(page)
    assert bare_costs(tables, text, "USD") == [], stem
    if stem == "fleets":  # the check looked at some
        assert len(PER_HOUR.findall(text)) + cost_cells(tables, "USD") >= 2
