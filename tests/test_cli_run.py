"""`simkv run / validate / schema` through typer's runner and the installed entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simkv.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_run_writes_outputs_to_reports_run_name(tiny: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["run", str(tiny)])
    assert result.exit_code == 0, result.output
    out = tmp_path / "reports" / "tiny-cli"
    for name in ("requests.parquet", "steps.parquet", "summary.json", "config.resolved.yaml"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == 3
    assert "Request throughput (req/s)" in result.output


def test_run_set_override_and_out(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere"
    result = runner.invoke(
        app, ["run", str(tiny), "--out", str(out), "--set", "workload.limit=2", "--check"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["num_requests"] == 2
    assert "limit: 2" in (out / "config.resolved.yaml").read_text()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("kv_cache: {block_size: 4, num_blocks: 40}", "kv_cache: {block_sise: 4}"),
         "tiny.yaml:9 kv_cache.block_sise: unknown key"),
        (("scheduler: {kind: vllm_v1}", "scheduler: {kind: vllm_v9}"), "tiny.yaml:10 scheduler"),
        (("gpu: a100-80gb", "gpu: a100-80"), "tiny.yaml:8 gpu: "),
        (("path: trace.csv", "path: missing.csv"), "missing.csv"),
    ],
)  # fmt: skip
def test_bad_config_is_one_line_exit_2(tiny: Path, edit: tuple[str, str], expected: str) -> None:
    tiny.write_text(tiny.read_text().replace(*edit))
    result = runner.invoke(app, ["run", str(tiny)])
    assert result.exit_code == 2
    assert expected in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_bad_trace_value_names_file_line_and_column(tiny: Path, tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0,x,3\n")
    result = runner.invoke(app, ["run", str(tiny)])
    assert result.exit_code == 2
    assert "trace.csv:3" in result.output and "prompt_tokens" in result.output


def test_kv_too_small_for_max_model_len(tiny: Path) -> None:
    result = runner.invoke(app, ["run", str(tiny), "--set", "kv_cache.num_blocks=8"])
    assert result.exit_code == 2
    assert "max_model_len 64" in result.output


def test_validate_prints_resolved_config(tiny: Path) -> None:
    result = runner.invoke(app, ["validate", str(tiny)])
    assert result.exit_code == 0, result.output
    assert "kv_bytes" not in result.output  # derived numbers are not config
    assert "num_layers: 32" in result.output  # the preset is expanded
    assert "max_num_batched_tokens: 8192" in result.output  # defaults are printed
    assert "40 blocks x 4 tokens = 160 token slots" in result.output


def test_schema_is_json() -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert "workload" in schema["properties"]


def test_installed_entry_point(tiny: Path, tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "simkv"
    assert exe.is_file(), "the simkv console script is installed with the package"
    done = subprocess.run(
        [str(exe), "run", str(tiny), "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    bad = subprocess.run(
        [str(exe), "run", str(tmp_path / "nope.yaml")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("error: ") and "nope.yaml" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_set_refines_a_section_the_file_leaves_out(tiny: Path) -> None:
    override = "cost_model.swap_copy_latency_us=7"
    result = runner.invoke(app, ["validate", str(tiny), "--set", override])
    assert result.exit_code == 0, result.output
    assert "kind: roofline" in result.output and "swap_copy_latency_us: 7.0" in result.output
