"""`simkv sweep` and `simkv report` through typer's runner."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from simkv.cli import app
from tests.conftest import TINY

runner = CliRunner()


def _tiny_sweep(tmp_path: Path) -> Path:
    (tmp_path / "trace.csv").write_text(
        "arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.01,20,3\n0.02,7,9\n0.03,30,4\n"
    )
    (tmp_path / "tiny.yaml").write_text(TINY)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "name: tiny-sweep\nbase: tiny.yaml\ngrid:\n  kv_cache.block_size: [4, 8]\n"
        "variants:\n  v1: {scheduler: {kind: vllm_v1}}\n  v0: {scheduler: {kind: vllm_v0}}\n"
    )
    return sweep


def test_sweep_then_resume_then_report(tmp_path: Path) -> None:
    sweep, out = _tiny_sweep(tmp_path), tmp_path / "out"
    first = runner.invoke(app, ["sweep", str(sweep), "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert "4 runs ran, 0 skipped" in first.output
    table = pd.read_parquet(out / "sweep.parquet")
    assert list(table["status"]) == ["ok"] * 4
    assert (out / "report.html").is_file()
    again = runner.invoke(app, ["sweep", str(sweep), "--out", str(out), "--resume"])
    assert "0 runs ran, 4 skipped" in again.output
    run_dirs = sorted((out / "runs").iterdir())
    rebuilt = runner.invoke(app, ["report", str(run_dirs[0])])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert (run_dirs[0] / "report.html").is_file()
    compare = tmp_path / "cmp.html"
    both = runner.invoke(app, ["report", str(run_dirs[0]), str(run_dirs[1]), "--out", str(compare)])
    assert both.exit_code == 0, both.output
    assert "fig-cmp-latency-cdf" in compare.read_text()
    swept = runner.invoke(app, ["report", str(out)])
    assert swept.exit_code == 0 and "fig-sweep-pareto" in (out / "report.html").read_text()


def test_sweep_bad_file_is_one_line(tmp_path: Path) -> None:
    sweep = _tiny_sweep(tmp_path)
    sweep.write_text(sweep.read_text().replace("kv_cache.block_size", "kv_cache.block_sise"))
    result = runner.invoke(app, ["sweep", str(sweep), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "sweep.yaml" in result.output and "block_sise" in result.output
    assert "Traceback" not in result.output


def test_report_of_a_missing_folder(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "not a run or sweep folder" in result.output
