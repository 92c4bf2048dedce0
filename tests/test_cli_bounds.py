"""Unbounded inputs are refused before a run: trace priorities and arrival times, generated
workloads too large for memory (duration × rate, multi-turn turns), through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from simkv.cli import app
from tests.hostile.cli import SYNTHETIC, one_error

runner = CliRunner()

MULTI_TURN = """\
name: bounds
workload:
  kind: multi_turn
  num_sessions: 2
  arrival: {kind: poisson, rate: 5}
  turns: {kind: fixed, value: 20000}
  think_s: {kind: fixed, value_s: 1}
  first_prompt_tokens: {kind: fixed, value: 1}
  new_tokens: {kind: fixed, value: 1}
  output_tokens: {kind: fixed, value: 1}
  max_prompt_tokens: 100000
model: {preset: llama-2-7b, max_model_len: 64}
gpu: a100-80gb
kv_cache: {block_size: 4, num_blocks: 40}
"""


def _priority_trace(tiny: Path, value: str) -> Path:
    columns = "{arrival_s: arrival_s, priority: priority}"
    tiny.write_text(tiny.read_text().replace("{arrival_s: arrival_s}", columns))
    trace = tiny.parent / "trace.csv"
    header = "arrival_s,prompt_tokens,output_tokens,priority"
    trace.write_text(f"{header}\n0,10,5,1\n0.01,20,3,{value}\n")
    return trace


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1e30", "must be ≤ 2147483647"),
        ("9" * 45, "must be ≤ 2147483647"),
        ("-3000000000", "must be ≥ -2147483648"),
        ("1.5", "not an integer"),
        ("nan", "missing value"),
        ("", "missing value"),
        ("high", "not a number"),
    ],
)
def test_trace_priority_out_of_range_is_located(
    tiny: Path, tmp_path: Path, value: str, problem: str
) -> None:
    trace = _priority_trace(tiny, value)
    line = one_error(["run", str(tiny), "--out", str(tmp_path / "o")], f"{trace}:3 priority:")
    assert problem in line
    assert not (tmp_path / "o").exists()


def test_negative_trace_priority_is_a_priority(tiny: Path, tmp_path: Path) -> None:
    _priority_trace(tiny, "-7")
    result = runner.invoke(app, ["run", str(tiny), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output


def test_trace_arrival_beyond_the_horizon_is_located(tiny: Path, tmp_path: Path) -> None:
    trace = tiny.parent / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1e300,20,3\n")
    line = one_error(["run", str(tiny), "--out", str(tmp_path / "o")], f"{trace}:3 arrival_s:")
    assert "must be ≤ 1000000000" in line


def test_time_scale_beyond_the_horizon_is_blamed_on_set(tiny: Path, tmp_path: Path) -> None:
    args = ["run", str(tiny), "--out", str(tmp_path / "o"), "--set", "workload.time_scale=1e300"]
    line = one_error(args, "--set workload.time_scale:")
    assert "MAX_ARRIVAL_S" in line


@pytest.mark.parametrize(
    ("sets", "place"),
    [
        (["workload.arrival.rate=1e9", "workload.duration_s=1e9"], "--set workload.duration_s:"),
        (["workload.arrival.rate=null", "workload.arrival.schedule=[[0, 1], [5, 1e300]]"],
         "bounds.yaml:4 workload.duration_s:"),
    ],
)  # fmt: skip
def test_duration_times_rate_beyond_the_request_limit(
    tmp_path: Path, sets: list[str], place: str
) -> None:
    config = tmp_path / "bounds.yaml"
    config.write_text(SYNTHETIC)
    args = ["validate", str(config)] + [arg for item in sets for arg in ("--set", item)]
    line = one_error(args, place)
    assert "more than 10,000,000 (simkv.config.limits.MAX_REQUESTS)" in line


def test_priority_values_are_bounded(tmp_path: Path) -> None:
    config = tmp_path / "bounds.yaml"
    config.write_text(SYNTHETIC)
    args = ["validate", str(config), "--set", "workload.priority={values: [0, 3000000000]}"]
    one_error(args, "--set workload.priority.values.1: Input should be less than or equal")


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        ([], "800,000,000 prompt segments, more than 100,000,000"),
        (["workload.num_sessions=1000"], "20,000,000 turns, more than 10,000,000 requests"),
    ],
)
def test_multi_turn_too_large_for_memory(tmp_path: Path, sets: list[str], message: str) -> None:
    config = tmp_path / "bounds.yaml"
    config.write_text(MULTI_TURN)
    args = ["run", str(config), "--out", str(tmp_path / "o")]
    args += [arg for item in sets for arg in ("--set", item)]
    line = one_error(args, f"{config}:6 workload.turns:")
    assert message in line
