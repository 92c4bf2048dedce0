"""What `simkv run` and `simkv sweep` print, at 80 columns: grouped sections with units, the
SLO verdict, the sweep's table of runs and its headline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simkv.cli import app
from tests.test_cli_sweep_report import _tiny_sweep

runner = CliRunner()
WIDTH = {"COLUMNS": "80"}


def _fits(output: str) -> None:
    wide = [line for line in output.splitlines() if len(line) > 80]
    assert not wide, wide


def test_run_prints_sections_and_the_verdict(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # short paths in the "wrote" lines
    sets = ["--set", "slo.ttft_ms=1000000", "--set", "slo.tpot_ms=0.001"]
    result = runner.invoke(app, ["run", tiny.name, "--out", "o", *sets], env=WIDTH)
    assert result.exit_code == 0, result.output
    _fits(result.output)
    for label in ("Requests", "Throughput", "Time to first token", "Request goodput (req/s)",
                  "P99 TTFT (ms)", "Offered rate (req/s)", "Burstiness (inter-arrival CV)",
                  "Peak concurrency (requests)", "KV memory"):  # fmt: skip
        assert label in result.output, label
    assert "request_throughput" not in result.output  # labels, not keys
    assert re.search(
        r"SLO TTFT ≤ 1,000 s: PASS, p99 [\d.]+ ms; 100\.0 % of completed", result.output
    )
    assert re.search(r"SLO TPOT ≤ 0\.001 ms: FAIL, p99 .* ms; 0\.0 % of completed", result.output)
    assert re.search(r"Binding SLO: TPOT, p99 [\d,]+ % over its limit", result.output)


def test_sweep_ends_with_its_table_and_headline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sweep = _tiny_sweep(tmp_path)
    base = tmp_path / "tiny.yaml"
    base.write_text(base.read_text() + "slo: {ttft_ms: 1000000, tpot_ms: 12}\n")
    result = runner.invoke(app, ["sweep", sweep.name, "--out", "o"], env=WIDTH)
    assert result.exit_code == 0, result.output
    _fits(result.output)
    lines = result.output.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("#"))
    assert header.split() == ["#", "variant", "block_size", "SLOs", "goodput", "req/s", "p99",
                              "TTFT", "p99", "TPOT"]  # fmt: skip
    rows = [line.split() for line in lines if re.match(r"\s+[1-4] ", line)]
    assert [row[:4] for row in rows] == [
        ["1", "v1", "4", "pass"], ["2", "v1", "8", "pass"],
        ["3", "v0", "4", "FAIL"], ["4", "v0", "8", "FAIL"],
    ]  # fmt: skip
    # p99 TPOT: about 8.5 ms under v1, 16.6 ms under v0 (SLO 12 ms)
    assert any(line.startswith("Best among the 2 runs meeting the SLOs") for line in lines)
