"""The GPU-options page (simkv.report.options_report) from a hand-written fleets folder, its
chart, and the one way costs are written (conventions.money)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib as mpl
import pytest

from simkv.capacity.options import OptionRow, row_record
from simkv.report import figures as fg
from simkv.report.conventions import money, money_unit, text_overlaps
from simkv.report.options_figures import OptionPoint, options_figure
from simkv.report.options_report import render_options_report, write_options_report
from tests.report.costs import bare_costs, cost_cells, page_text, table_cells


@pytest.mark.parametrize(
    ("amount", "currency", "text"),
    [(6.0, "USD", "$6.00"), (1234.5, "USD", "$1,234.50"), (0.384, "EUR", "€0.38"),
     (6.0, "CHF", "6.00 CHF"), (0.00125, "USD", "$0.00125"), (-2.0, "GBP", "-£2.00"),
     (None, "USD", "—")],
)  # fmt: skip
def test_money(amount: float | None, currency: str, text: str) -> None:
    assert money(amount, currency) == text


def test_money_unit() -> None:
    assert (money_unit("USD"), money_unit("EUR"), money_unit("JPY")) == ("$", "€", "JPY")


def _rows(currency: str) -> list[OptionRow]:
    margins = (("ttft", 0.8), ("tpot", 0.4))
    return [
        OptionRow("a100-tp1", 2.0, 1, 3, 7.5, 279.0, 37.9, currency, 900.0, 4000.0, 0.16, 0.93,
                  margins),
        OptionRow("h100-tp1", 3.5, 1, 1, 6.9, 141.0, 26.1, currency, 850.0, 3900.0, 0.10, 0.94,
                  margins),
        OptionRow("tiny", 1.0, 1, None, currency=currency),
    ]  # fmt: skip


def _folder(root: Path, currency: str) -> Path:
    """A fleets folder as ``simkv capacity --options`` writes it (h100-tp1 the cheapest)."""
    rows = _rows(currency)
    fleets = {
        "search": "fleets", "at_rate": 8.0, "count_min": 1, "count_max": 8,
        "outcome": "found", "failure": None, "cheapest": "h100-tp1", "simulations": 9,
        "currency": currency,
        "options": [{"name": r.name, "outcome": "found" if r.replicas else "none_meets",
                     **row_record(r), "pareto": r.replicas is not None,
                     "cheapest": r.name == "h100-tp1", "folder": r.name} for r in rows],
    }  # fmt: skip
    root.mkdir()
    (root / "capacity.json").write_text(json.dumps(fleets))
    for row in rows:
        (root / row.name).mkdir()
        slo = {"ttft_ms": 2000.0, "tpot_ms": 100.0, "e2el_ms": None, "percentile": 99.0}
        (root / row.name / "capacity.json").write_text(json.dumps({"slo": slo}))
    return root


@pytest.mark.parametrize("currency", ["USD", "CHF"])
def test_every_cost_on_the_page_carries_the_currency(tmp_path: Path, currency: str) -> None:
    page = render_options_report(_folder(tmp_path / "fleets", currency))
    tables = table_cells(page)
    assert bare_costs(tables, page_text(page), currency) == []
    assert cost_cells(tables, currency) == 2 * 4 + 1  # $/h, price, $/M out, $/M all; tiny's price
    headline = page[page.index('id="options-headline"') :].split("</p>")[0]
    cost = money(3.5, currency)
    assert f"h100-tp1, 1 replica × TP1 = 1 GPU, {cost} per hour" in headline


def test_the_page_links_each_option_and_states_the_units(tmp_path: Path) -> None:
    page = render_options_report(_folder(tmp_path / "fleets", "EUR"))
    for name in ("a100-tp1", "h100-tp1", "tiny"):
        assert f'<a href="{name}/report.html">{name}</a>' in page
    answers, units = table_cells(page)
    assert answers[0][:5] == ["option", "replicas", "GPUs", "price per GPU-hour", "€/h"]
    assert answers[3][1] == "none meets"
    h100 = dict(zip(units[0], units[2], strict=True))
    assert h100["€ per M output tokens"] == money(3.5 / (850 * 3600) * 1e6, "EUR")
    assert (h100["MFU"], h100["busy-time headroom"], h100["TPOT margin"]) == ("10 %", "6 %",
                                                                             "40 %")  # fmt: skip
    assert h100["binding SLO"] == "TPOT"
    assert 'id="fig-options-cost"' in page and "<script" not in page


def test_the_page_is_the_same_bytes_twice(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "fleets", "USD")
    first = write_options_report(folder).read_bytes()
    assert write_options_report(folder).read_bytes() == first


def test_the_chart_has_no_overlapping_text() -> None:
    points = [OptionPoint(r.name, r.cost_per_hour or 0.0,
                          {"p99_ttft_ms": r.p99_ttft_ms, "p99_tpot_ms": r.p99_tpot_ms},
                          True, r.name == "h100-tp1") for r in _rows("EUR")[:2]]  # fmt: skip
    with mpl.rc_context(dict(fg.REPORT_RC)):
        drawn = options_figure(points, "EUR", {"ttft_ms": 2000.0, "tpot_ms": 100.0})
        assert drawn.figure is not None
        assert text_overlaps(drawn.figure) == []
        labels = [ax.get_xlabel() for ax in drawn.figure.axes]
    assert labels == ["cost per hour (€/h)"] * 2
    assert options_figure([], "USD", {}).figure is None
