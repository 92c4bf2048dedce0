"""Every error of a config in one pass, one line each, exit 2: malformed ``--set`` items,
validation, rules over several sections, missing profiles and measurements, and (for a valid
config) the KV pool, schedulability and the trace's cells together."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.hostile.cli import errors

runner = CliRunner()


def _with_sets(args: list[str], sets: list[str]) -> list[str]:
    return args + [arg for item in sets for arg in ("--set", item)]


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (
            ["nokey", "bad key=1", "slo.ttft_ms=-1"],
            ["--set: expected key.path=value, got 'nokey'",
             "--set: expected key.path=value, got 'bad key=1'",
             "--set slo.ttft_ms: Input should be greater than 0"],
        ),
        (
            ["preemption.mode=swap", "slo.ttft_ms=-1"],
            ["--set slo.ttft_ms: Input should be greater than 0",
             "--set preemption.mode: swap: vllm_v1 preempts by recompute only"],
        ),
        (
            ["parallel.tensor_parallel=3", "scheduler.kind=vllm_v0",
             "preemption.victim=lowest_priority", "slo.ttft_ms=-1"],
            ["--set slo.ttft_ms: Input should be greater than 0",
             "--set preemption.victim: lowest_priority needs scheduler vllm_v1",
             "--set parallel.tensor_parallel: 3 must divide the model's 32 attention heads"],
        ),
        (
            ["cost_model.profile=nowhere.yaml", "slo.ttft_ms=-1"],
            ["--set cost_model.profile: no such profile: {dir}/nowhere.yaml",
             "--set slo.ttft_ms: Input should be greater than 0"],
        ),
        (
            ["workload={kind: measured, path: nowhere}", "slo.ttft_ms=-1"],
            ["--set workload.path: no such file or folder: {dir}/nowhere",
             "--set slo.ttft_ms: Input should be greater than 0"],
        ),
    ],
)  # fmt: skip
def test_validate_reports_every_error_at_once(
    tiny: Path, sets: list[str], expected: list[str]
) -> None:
    lines = errors(_with_sets(["validate", str(tiny)], sets))
    assert sorted(lines) == sorted(line.format(dir=tiny.parent) for line in expected)


def test_a_rule_is_reported_beside_an_error_in_the_file(tiny: Path) -> None:
    tiny.write_text(tiny.read_text() + "slo: {ttft_ms: -1}\npreemption: {mode: swap}\n")
    assert errors(["validate", str(tiny)]) == [
        f"{tiny}:11 slo.ttft_ms: Input should be greater than 0",
        f"{tiny}:12 preemption.mode: swap: vllm_v1 preempts by recompute only",
    ]


def test_validate_checks_the_kv_pool_as_run_does(tiny: Path) -> None:
    lines = errors(["validate", str(tiny), "--set", "kv_cache.num_blocks=3"])
    assert lines == [
        f"{tiny}:9 kv_cache: the KV cache holds 12 tokens (3 blocks of 4), less than "
        "max_model_len 64; give it more memory or lower model.max_model_len "
        "(with --set kv_cache.num_blocks)"
    ]


def test_run_reports_trace_kv_pool_and_schedulability_together(tiny: Path, tmp_path: Path) -> None:
    """(vllm_v1's budget below max_model_len with chunked prefill off is a validation error
    now, as vLLM refuses it; orca's budget below a prompt is the start-up schedulability
    check.)"""
    trace = tiny.parent / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.1,-1,3\n")
    run = ["run", str(tiny), "--out", str(tmp_path / "o")]
    lines = errors(_with_sets(run, ["kv_cache.num_blocks=3"]))
    assert lines[0] == f"{trace}:3 prompt_tokens: must be ≥ 1, got -1"
    assert lines[1].startswith(f"{tiny}:9 kv_cache: the KV cache holds 12 tokens")
    assert len(lines) == 2
    orca = ["scheduler.kind=orca", "scheduler.max_num_batched_tokens=5"]
    lines = errors(_with_sets(run, orca))
    assert lines == [f"{trace}:3 prompt_tokens: must be ≥ 1, got -1"]  # (workload unknown)
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n")
    lines = errors(_with_sets(run, orca))
    assert len(lines) == 1
    assert lines[0].startswith("--set scheduler.max_num_batched_tokens: 5 tokens, but a prompt")
    assert not (tmp_path / "o").exists()
