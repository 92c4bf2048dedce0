"""Failures are not answers: capacity searches and sweeps whose runs fail say so, with the
first error and its run folder, and exit 1 (through the installed entry point)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.capacity.conftest import CONFIG, run_capacity

SIMKV = str(Path(sys.executable).parent / "simkv")
SMALL_KV = "kv_cache: the KV cache holds 32 tokens (2 blocks of 16), less than max_model_len"
BAD_COST = "bad.csv:2 step_time_ms: expected a positive number, got 'abc'"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """The capacity tests' config, and ``bad.csv``: a step-time table with a bad value."""
    (tmp_path / "bad.csv").write_text("num_tokens,step_time_ms\n1,abc\n")
    path = tmp_path / "cap.yaml"
    path.write_text(CONFIG)
    return path


def _failed_run(out: Path, stdout: str, first: str) -> Path:
    """The run folder the answer line names (its error.txt exists and starts with ``first``)."""
    answer = next(line for line in stdout.splitlines() if line.startswith("answer: "))
    error_txt = Path(answer.rsplit("(", 1)[1].split(")")[0])
    if not error_txt.is_absolute():
        error_txt = out.parent / error_txt
    assert error_txt.read_text().startswith(first)
    return error_txt.parent


def test_a_rate_search_whose_runs_fail_is_no_answer(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_capacity(
        str(config),
        "--set",
        "kv_cache.num_blocks=2",
        "--rate-max",
        "4",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert "none meets" not in done.stdout and "Traceback" not in done.stderr
    assert "answer: none: the run at workload.arrival.rate=0.25 failed: " + SMALL_KV in done.stdout
    run_dir = _failed_run(out, done.stdout, SMALL_KV)
    answer = json.loads((out / "capacity.json").read_text())
    assert (answer["outcome"], answer["answer_rate"], answer["rounds"]) == ("failed", None, 1)
    failure = answer["failure"]
    assert failure["run"] == f"runs/{run_dir.name}" and failure["error"].startswith(SMALL_KV)
    assert "Capacity: no answer: the run at workload.arrival.rate=0.25 failed" in (
        (out / "report.html").read_text())  # fmt: skip


def test_a_replica_search_whose_runs_fail_is_no_answer(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["--set", "cost_model={kind: table, path: bad.csv}", "--at-rate", "4"]
    done = run_capacity(str(config), *args, "--count-max", "4", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "answer: none: the run at fleet.replicas.0.count=1 failed: " in done.stdout
    _failed_run(out, done.stdout, str(tmp_path / BAD_COST))
    answer = json.loads((out / "capacity.json").read_text())
    assert (answer["outcome"], answer["answer_replicas"]) == ("failed", None)
    assert answer["failure"]["value"] == 1


def test_one_failed_option_names_no_cheapest_fleet(config: Path, tmp_path: Path) -> None:
    """The failed option could have been the cheapest: no cheapest, no Pareto front; the
    other option's row still stands."""
    (tmp_path / "options.yaml").write_text(
        "options:\n  - {name: a100, price_per_gpu_hour: 2.0, set: [gpu=a100-80gb]}\n"
        "  - {name: bad, price_per_gpu_hour: 1.0, "
        "set: ['cost_model={kind: table, path: bad.csv}']}\n"
    )
    out = tmp_path / "out"
    args = ["--at-rate", "4", "--count-max", "2", "--options", str(tmp_path / "options.yaml")]
    done = run_capacity(str(config), *args, "--out", str(out), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "cheapest" not in done.stdout and "Pareto" not in done.stdout
    assert "answer: none: option bad: the run at fleet.replicas.0.count=1 failed: " in done.stdout
    _failed_run(out, done.stdout, str(tmp_path / BAD_COST))
    fleets = json.loads((out / "capacity.json").read_text())
    assert (fleets["outcome"], fleets["cheapest"]) == ("failed", None)
    assert fleets["failure"]["option"] == "bad" and fleets["failure"]["run"].startswith("bad/runs/")
    rows = {row["name"]: row for row in fleets["options"]}
    assert rows["a100"]["replicas"] == 1 and not rows["a100"]["pareto"]
    assert rows["bad"]["outcome"] == "failed"


def test_a_sweep_names_its_first_failure(config: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("name: f\nbase: cap.yaml\ngrid:\n  kv_cache.num_blocks: [2000, 2, 3]\n")
    out = tmp_path / "out"
    done = subprocess.run(
        [SIMKV, "sweep", str(sweep), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    table = pd.read_parquet(out / "sweep.parquet")
    first = table[table.status == "failed"].run_id.iloc[0]
    error_txt = out / "runs" / first / "error.txt"
    assert f"first failure: {SMALL_KV}" in done.stdout and f"({error_txt})" in done.stdout
    report = (out / "report.html").read_text()
    assert f"2 of 3 runs failed; the first, #2 (kv_cache.num_blocks=2) (runs/{first})" in report
