"""GPUs against target rate: ``simkv capacity --at-rate 30,60 [--options]`` through
``simkv.cli.app`` (simkv.capacity.curve, simkv.report.curve_report), and its rate list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simkv.capacity.curve import MAX_RATES, parse_rates, rate_folder
from simkv.cli import app
from simkv.errors import InputError
from simkv.report.conventions import money
from tests.capacity.test_cli_units import OPTIONS_EUR
from tests.report.costs import bare_costs, page_text, table_cells

runner = CliRunner()


def test_rates_and_their_folders() -> None:
    assert parse_rates("16") == [16.0]
    assert parse_rates("4, 8,2.5") == [4.0, 8.0, 2.5]
    assert (rate_folder(4.0), rate_folder(2.5)) == ("at-4", "at-2.5")
    for bad, says in (
        ("4,x", "comma list"),
        ("4,4", "given twice"),
        ("", "comma list"),
        (",".join(map(str, range(1, MAX_RATES + 2))), f"at most {MAX_RATES}"),
    ):
        with pytest.raises(InputError, match=says):
            parse_rates(bad)  # fmt: skip


def test_gpus_against_target_rate_among_options(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "eur.yaml").write_text(OPTIONS_EUR)
    args = ["capacity", config.name, "--at-rate", "60,30", "--count-max", "4",
            "--options", "eur.yaml"]  # fmt: skip
    result = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert [line for line in result.stdout.splitlines() if len(line) > 80] == []
    out = tmp_path / "reports" / "cap-fleets-curve"
    curve = json.loads((out / "capacity.json").read_text())
    assert (curve["search"], curve["rates"], curve["currency"]) == ("curve", [30.0, 60.0], "EUR")
    for point in curve["points"]:
        # each rate's folder is the one-rate search's, its answer the same cheapest option
        fleets = json.loads((out / point["folder"] / "capacity.json").read_text())
        assert (fleets["search"], fleets["at_rate"]) == ("fleets", point["at_rate"])
        assert fleets["cheapest"] == point["cheapest"]
        gpus = {row["name"]: row["gpus"] for row in fleets["options"]}
        assert {row["name"]: row["gpus"] for row in point["rows"]} == gpus
        assert (out / point["folder"] / "options.html").is_file()
        best = next(row for row in point["rows"] if row["name"] == point["cheapest"])
        sentence = f"cheapest at {point['at_rate']:g} req/s: {best['name']}, "
        assert sentence in result.stdout
        assert f"{money(best['cost_per_hour'], 'EUR')}/h" in result.stdout
    low, high = ({r["name"]: r["gpus"] for r in p["rows"]} for p in curve["points"])
    assert all(high[name] >= low[name] for name in low)  # twice the rate never needs fewer
    page = (out / "options.html").read_text()
    assert "wrote reports/cap-fleets-curve/options.html" in result.stdout
    assert '<a href="at-30/options.html">30 req/s</a>' in page
    assert bare_costs(table_cells(page), page_text(page), "EUR") == []
    assert 'id="fig-curve"' in page and "€" in page


def test_gpus_against_target_rate_without_options(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["capacity", config.name, "--at-rate", "30,60", "--count-max", "4"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "reports" / "cap-replicas-curve"
    curve = json.loads((out / "capacity.json").read_text())
    assert curve["currency"] is None and curve["options"] is None
    for point in curve["points"]:
        replicas = json.loads((out / point["folder"] / "capacity.json").read_text())
        assert replicas["answer_replicas"] == point["rows"][0]["replicas"]
        assert (out / point["folder"] / "report.html").is_file()
    page = (out / "replicas.html").read_text()
    assert '<a href="at-60/report.html">60 req/s</a>' in page and "$" not in page_text(page)
    assert "wrote reports/cap-replicas-curve/replicas.html" in result.stdout
