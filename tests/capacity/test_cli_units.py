"""``simkv capacity --at-rate --options`` through ``simkv.cli.app``: the options file's currency
on every cost printed, written and rendered, the planner's units at each answer, 80 columns, a
bad ``currency:``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simkv.cli import app
from simkv.report.conventions import money
from tests.report.costs import bare_costs, cost_cells, page_text, table_cells

runner = CliRunner()
OPTIONS_EUR = """\
currency: EUR
options:
  - {name: a100-tp1, price_per_gpu_hour: 1.8, set: [gpu=a100-80gb]}
  - {name: h100-tp1, price_per_gpu_hour: 3.2, set: [gpu=h100-80gb]}
"""
COST_LINE = re.compile(r"/h\b|per hour|/M\b")
"""A line of the terminal naming a cost (a cost column's header, the answer)."""


def test_every_cost_carries_the_currency(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "eur.yaml").write_text(OPTIONS_EUR)
    args = ["capacity", config.name, "--at-rate", "60", "--count-max", "4",
            "--options", "eur.yaml"]  # fmt: skip
    result = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line for line in lines if len(line) > 80] == []
    out = tmp_path / "reports" / "cap-fleets"
    fleets = json.loads((out / "capacity.json").read_text())
    assert fleets["currency"] == "EUR" and "$" not in result.stdout
    # the two tables: a cost column's header names the currency, each of its rows carries it
    answers = lines.index(next(line for line in lines if line.startswith("option ")))
    units = lines.index(next(line for line in lines if line.startswith("at the answer")))
    assert "€/h" in lines[answers] and "€/M out" in lines[units] and "€/M all" in lines[units]
    rows = {row["name"]: row for row in fleets["options"]}
    for line in lines[answers + 1 : units]:
        assert money(rows[line.split()[0]]["cost_per_hour"], "EUR") in line
    for line in lines[units + 1 : units + 1 + len(rows)]:
        assert line.count("€") == 2, line
    costly = [line for line in lines if COST_LINE.search(line)]
    assert costly and [line for line in costly if "€" not in line] == []
    best = rows[fleets["cheapest"]]
    assert f"{money(best['cost_per_hour'], 'EUR')}/h" in result.stdout
    # the planner's units, from the answer run's summary
    for row in rows.values():
        per_m = row["cost_per_hour"] / (row["output_throughput"] * 3600) * 1e6
        assert row["cost_per_m_output_tokens"] == pytest.approx(per_m)
        assert row["requests_per_gpu"] == pytest.approx(row["request_throughput"] / row["gpus"])
        assert 0 < row["mfu_frac"] < 1 and 0 < row["max_busy_frac"] <= 1
        assert row["busy_headroom_frac"] == pytest.approx(1 - row["max_busy_frac"])
        assert set(row["slo_margins"]) == {"ttft"} and row["binding_slo"] == "ttft"
        assert 0 <= row["slo_margins"]["ttft"] < 1  # meets its SLO: p99 TTFT ≤ 200 ms
    # the comparison page: every cost in euros, its headline the answer's cost
    page = (out / "options.html").read_text()
    assert f"wrote {Path('reports/cap-fleets/options.html')}" in result.stdout
    assert bare_costs(table_cells(page), page_text(page), "EUR") == []
    assert cost_cells(table_cells(page), "EUR") >= 4 * len(rows)
    for name in rows:  # each option's own report states its costs in euros too
        report = page_text((out / name / "report.html").read_text())
        assert bare_costs([], report, "EUR") == [] and "€" in report


@pytest.mark.parametrize("currency", ["eur", "EURO", "'1$'"])
def test_a_bad_currency_is_one_line_exit_2(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, currency: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text(f"currency: {currency}\n" + OPTIONS_EUR.split("\n", 1)[1])
    args = ["capacity", config.name, "--at-rate", "60", "--options", "bad.yaml"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: bad.yaml:1 currency: expected an ISO 4217 currency code"
    )
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not (tmp_path / "reports").exists()
