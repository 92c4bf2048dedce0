"""The CLI behaves like its peers: help shows brackets and choices, -h, --version, completion,
bare ``simkv`` prints help and succeeds, quiet stderr off a terminal, one number format."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simkv import __version__
from simkv.cli import app
from simkv.metrics.text import format_value

runner = CliRunner()


def test_bare_simkv_prints_help_and_exits_0() -> None:
    result = runner.invoke(app, [])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output and "run" in result.output


def test_version_and_short_help() -> None:
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0
    assert version.output.strip() == f"simkv {__version__}"
    short = runner.invoke(app, ["run", "-h"])
    assert short.exit_code == 0
    assert short.output == runner.invoke(app, ["run", "--help"]).output


def test_help_keeps_square_brackets_and_lists_choices() -> None:
    top = runner.invoke(app, ["--help"]).output
    assert "--install-completion" in top
    sweep = runner.invoke(app, ["sweep", "--help"]).output
    assert "[default: reports/<sweep" in sweep
    assert "[default: CPUs]" in sweep
    assert "serial|process|ray" in sweep
    assert "pip install -e '.[ray]'" in " ".join(sweep.split())
    run = " ".join(runner.invoke(app, ["run", "--help"]).output.split())
    assert "parquet|csv" in run
    assert "[default: False]" in run or "[default: no-check]" in run


def test_executor_outside_the_choices_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["sweep", str(tmp_path / "x.yaml"), "--executor", "gpu"])
    assert result.exit_code == 2
    assert "gpu" in result.output


def test_run_summary_formats_numbers_one_way_and_stderr_stays_quiet(
    tiny: Path, tmp_path: Path
) -> None:
    result = runner.invoke(app, ["run", str(tiny), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no bar, no status, no stray blank line off a terminal
    assert not re.search(r"\d e[+-]\d|\de[+-]\d", result.stdout)
    assert re.search(r"Request throughput \(req/s\)\s*│\s*[\d,]+\.\d\d\s", result.stdout)


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        ("num_requests", 19366, "19,366"),
        ("mean_ttft_ms", 13710.52, "13,710.52"),
        ("mean_tpot_ms", 0.003734, "0.00"),
        ("request_throughput", 5.4123, "5.41"),
        ("mean_kv_usage", 0.74412, "0.7441"),
        ("prefix_hit_rate", 0.0, "0.0000"),
        ("swap_gib", 1.5, "1.500"),
        ("mean_fork_saving", None, "—"),
    ],
)
def test_format_value_by_unit(key: str, value: float | None, text: str) -> None:
    assert format_value(key, value) == text


def test_run_percentiles_option(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(tiny), "--out", str(out), "--percentiles", "50,99.9"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    for key in ("p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "p99.9_ttft_ms", "std_e2el_ms"):
        assert key in summary, key
    assert "P99.9 ITL (ms)" in result.stdout
    bad = runner.invoke(app, ["run", str(tiny), "--percentiles", "50,x"])
    assert bad.exit_code == 2
    assert "--percentiles" in bad.output


def test_entry_point_is_quiet_on_a_pipe_and_bare_simkv_succeeds(tiny: Path, tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "simkv"
    done = subprocess.run(
        [str(exe), "run", str(tiny), "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    bare = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=False)
    assert bare.returncode == 0 and "Usage:" in bare.stdout


def test_on_a_terminal_writing_the_report_shows_a_status(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats stderr as a terminal
    monkeypatch.delenv("NO_COLOR", raising=False)
    result = runner.invoke(app, ["run", str(tiny), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "writing" in result.stderr and "report.html" in result.stderr
