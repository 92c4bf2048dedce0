"""The CLI's error boundary: outputs, damaged run folders and ``--debug`` (issue 15)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from simkv.cli import app

runner = CliRunner()


@pytest.fixture
def run_dir(tiny: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(tiny), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _one_error(args: list[str], place: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    assert place in lines[0]
    return lines[0]


@pytest.mark.parametrize("target", ["afile", "/dev/null", "afile/sub"])
def test_out_that_is_not_a_folder_is_an_error(tiny: Path, tmp_path: Path, target: str) -> None:
    (tmp_path / "afile").write_text("kept")
    path = target if target.startswith("/") else str(tmp_path / target)
    _one_error(["run", str(tiny), "--out", path], path)
    assert (tmp_path / "afile").read_text() == "kept"


def test_out_with_a_colon_is_a_local_path(tiny: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", str(tiny), "--out", "ab:12"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "ab:12" / "requests.parquet").is_file()
    assert runner.invoke(app, ["report", "ab:12"]).exit_code == 0


def _damage_summary_list(run: Path) -> Path:
    (run / "summary.json").write_text("[1, 2]")
    return run / "summary.json"


def _damage_summary_text(run: Path) -> Path:
    (run / "summary.json").write_text(json.dumps({"request_throughput": "fast"}))
    return run / "summary.json"


def _damage_config_binary(run: Path) -> Path:
    (run / "config.resolved.yaml").write_bytes(b"\x00\xff\xfe binary")
    return run / "config.resolved.yaml"


def _damage_requests_empty(run: Path) -> Path:
    path = run / "requests.parquet"
    pd.read_parquet(path).iloc[:0].to_parquet(path)
    return path


def _damage_steps_columns(run: Path) -> Path:
    path = run / "steps.parquet"
    pd.read_parquet(path).drop(columns=["batch_size"]).to_parquet(path)
    return path


def _damage_itl_garbage(run: Path) -> Path:
    (run / "itl.parquet").write_bytes(b"PAR1 not really")
    return run / "itl.parquet"


@pytest.mark.parametrize(
    "damage",
    [
        _damage_summary_list,
        _damage_summary_text,
        _damage_config_binary,
        _damage_requests_empty,
        _damage_steps_columns,
        _damage_itl_garbage,
    ],
)
def test_report_on_a_damaged_run_names_the_file(run_dir: Path, damage) -> None:
    broken = damage(run_dir)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    _one_error(["report", str(run_dir)], str(broken))
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


def test_debug_shows_the_traceback(tiny: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    args = ["run", str(tiny), "--out", str(tmp_path / "afile")]
    result = runner.invoke(app, ["--debug", *args])
    assert result.exit_code != 2
    assert "output is not a folder" in str(result.exception)


def test_sweep_variant_name_with_mathtext_is_drawn_as_written(tiny: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"name: math\nbase: {tiny}\nvariants:\n  '$\\foo$': {{seed: 1}}\n  ok: {{seed: 2}}\n"
    )
    out = tmp_path / "sweep-out"
    result = runner.invoke(app, ["sweep", str(sweep), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "$\\foo$" in (out / "report.html").read_text(encoding="utf-8")


def test_run_time_config_error_names_file_and_line(tiny: Path, tmp_path: Path) -> None:
    tiny.write_text(tiny.read_text().replace("num_blocks: 40", "num_blocks: 3"))
    line = _one_error(["run", str(tiny), "--out", str(tmp_path / "o")], f"{tiny}:9 kv_cache:")
    assert "the KV cache holds 12 tokens" in line
    assert not (tmp_path / "o").exists()


def _damage_steps_text(run: Path) -> Path:
    path = run / "steps.parquet"
    steps = pd.read_parquet(path)
    steps["decode_tokens"] = "many"
    steps.to_parquet(path)
    return path


def _damage_requests_infinite(run: Path) -> Path:
    path = run / "requests.parquet"
    requests = pd.read_parquet(path)
    requests.loc[0, "first_token_s"] = float("inf")
    requests.to_parquet(path)
    return path


def _damage_requests_missing(run: Path) -> Path:
    (run / "requests.parquet").unlink()
    return run


def _damage_steps_csv(run: Path) -> Path:
    (run / "steps.parquet").unlink()
    (run / "steps.csv").write_bytes(b'time_s,duration_s\n"unclosed\n\xff\xfe')
    return run / "steps.csv"


@pytest.mark.parametrize(
    "damage",
    [
        _damage_steps_columns,
        _damage_itl_garbage,
        _damage_steps_text,
        _damage_requests_infinite,
        _damage_requests_missing,
        _damage_steps_csv,
    ],
)
def test_trace_on_a_damaged_run_names_the_file(run_dir: Path, damage) -> None:
    broken = damage(run_dir)
    _one_error(["trace", str(run_dir)], str(broken))
    assert not (run_dir / "trace.json").exists()


def test_trace_entry_point_on_garbage_frames(run_dir: Path) -> None:
    simkv = Path(sys.executable).with_name("simkv")
    if not simkv.exists():
        pytest.skip("simkv entry point not installed")
    broken = _damage_steps_text(run_dir)
    proc = subprocess.run([str(simkv), "trace", str(run_dir)], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {broken}: damaged run file: decode_tokens is not a finite number"
    ]
