"""``simkv capacity`` through the installed entry point: answer, folder, resume, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.capacity.conftest import run_capacity


def test_capacity_answers_writes_a_sweep_folder_and_resumes(config: Path, tmp_path: Path) -> None:
    args = [str(config), "--rate-min", "1", "--rate-max", "400", "--tolerance", "0.1"]
    done = run_capacity(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "reports" / "cap-capacity"
    answer = json.loads((out / "capacity.json").read_text())
    assert answer["outcome"] == "found"
    assert answer["axis"] == "workload.arrival.rate"
    meets, fails = answer["bracket"]
    assert meets == answer["answer_rate"] and fails / meets <= 1.1
    assert f"answer: workload.arrival.rate={meets:g} req/s meets the SLOs" in done.stdout
    # at the answer: its p99s and the binding SLO (the only one set: TTFT, within 200 ms)
    assert f"at {meets:g} req/s: p99 TTFT " in done.stdout
    assert "\nBinding SLO: TTFT, p99 " in done.stdout and "below its limit" in done.stdout
    # the verdicts are the runs' own p99 TTFT against the SLO (200 ms)
    judged = {j["rate"]: j for j in answer["judged"]}
    assert judged[meets]["meets"] and judged[meets]["p99_ttft_ms"] <= 200
    assert not judged[fails]["meets"] and judged[fails]["p99_ttft_ms"] > 200
    # a sweep folder over the rate axis, in increasing rate, with its report
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["axes"] == ["workload.arrival.rate"]
    assert len(sweep["runs"]) == answer["simulations"] == len(judged)
    assert (out / "report.html").is_file()
    # the same command again reuses every finished run and gives the same answer
    again = run_capacity(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"(0 run now, {len(judged)} reused" in again.stdout
    assert json.loads((out / "capacity.json").read_text()) == answer


def test_no_rate_meets_is_an_answer(config: Path, tmp_path: Path) -> None:
    done = run_capacity(str(config), "--set", "slo.ttft_ms=1", "--rate-max", "4", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "answer: none meets: even workload.arrival.rate=0.25 misses the SLOs" in done.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--set", "slo.ttft_ms=null"], "cap.yaml slo: capacity needs an objective"),
        (["--rate-min", "8", "--rate-max", "2"], "need 0 < rate_min < rate_max"),
        (["--min-good", "1.5"], "--min-good: expected a share in (0, 1]"),
        (["--set", "workload.arrival={kind: poisson, schedule: [[0, 1.0]]}"],
         "workload.arrival: capacity scales a constant arrival rate"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2(
    config: Path, tmp_path: Path, args: list[str], expected: str
) -> None:
    done = run_capacity(str(config), *args, cwd=tmp_path)
    assert done.returncode == 2
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "reports").exists()


def test_any_out_folder_name_works(config: Path, tmp_path: Path) -> None:
    """``--out`` may be any folder: the sweep name it gives sweep.json is made safe."""
    out = tmp_path / "my results:1"
    done = run_capacity(str(config), "--set", "slo.ttft_ms=1", "--rate-max", "4",
                        "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "sweep.json").read_text())["name"] == "my_results_1"
    assert (out / "report.html").is_file()
