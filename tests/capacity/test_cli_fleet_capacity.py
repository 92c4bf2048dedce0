"""``simkv capacity --at-rate`` (and ``--options``) through the installed entry point: the
fewest replicas, the cheapest fleet, the folders, resume, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.capacity.conftest import run_capacity


def test_fewest_replicas_and_resume(config: Path, tmp_path: Path) -> None:
    args = [str(config), "--at-rate", "60", "--count-max", "16", "--per-round", "1"]
    done = run_capacity(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "reports" / "cap-replicas"
    answer = json.loads((out / "capacity.json").read_text())
    assert (answer["search"], answer["outcome"]) == ("replicas", "found")
    assert answer["axis"] == "fleet.replicas.0.count"
    assert "workload.arrival.rate=60.0" in answer["set"]
    fails, meets = answer["bracket"]
    assert meets == answer["answer_replicas"] == fails + 1 and meets > 1
    # the verdicts are the runs' own p99 TTFT against the SLO (200 ms)
    judged = {j["replicas"]: j for j in answer["judged"]}
    assert judged[meets]["meets"] and judged[meets]["p99_ttft_ms"] <= 200
    assert not judged[fails]["meets"] and judged[fails]["p99_ttft_ms"] > 200
    assert f"answer: {meets} replicas meet the SLOs at 60 req/s" in done.stdout
    # the planner's units at the answer, without a price: no cost anywhere
    units = answer["at_answer"]
    assert units["replicas"] == meets and "cost_per_hour" not in units
    assert units["requests_per_gpu"] == units["request_throughput"] / meets
    assert f"at the answer: {units['requests_per_gpu']:.3g} req/s per GPU, MFU " in done.stdout
    assert "$" not in done.stdout
    # one count per round: plain bisection from the bounds 1 and 16
    assert [j["replicas"] for j in answer["judged"]][:3] == [1, 16, 8]
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["axes"] == ["fleet.replicas.0.count"]
    assert len(sweep["runs"]) == len(judged)
    report = (out / "report.html").read_text()
    answer_tag = f'<b data-answer="answer_replicas">{meets}</b>'  # the headline's answer, marked
    assert f"the fewest meeting the SLOs at 60 req/s are {answer_tag}" in report
    again = run_capacity(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"(0 run now, {len(judged)} reused" in again.stdout
    assert json.loads((out / "capacity.json").read_text()) == answer


def test_the_cheapest_fleet_among_options(config: Path, tmp_path: Path) -> None:
    done = run_capacity(str(config), "--at-rate", "150", "--count-max", "16",
                     "--options", "options.yaml", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = tmp_path / "reports" / "cap-fleets"
    fleets = json.loads((out / "capacity.json").read_text())
    rows = {row["name"]: row for row in fleets["options"]}
    assert list(rows) == ["a100-tp1", "h100-tp1", "a100-tp2"]
    for row in rows.values():
        assert row["gpus"] == row["replicas"] * row["tensor_parallel"]
        assert row["cost_per_hour"] == row["gpus"] * row["price_per_gpu_hour"]
        option = json.loads((out / row["folder"] / "capacity.json").read_text())
        assert option["answer_replicas"] == row["replicas"]
        page = (out / row["folder"] / "report.html").read_text()
        assert "Cheapest fleet meeting the SLOs at 150 req/s: " in page
        assert f"This option, {row['folder']}: Replicas: the fewest" in page
        assert "Best" not in page[page.index('id="sweep-summary"') : page.index("</section>")]
    assert rows["a100-tp2"]["tensor_parallel"] == 2
    best = min(rows.values(), key=lambda row: (row["cost_per_hour"], row["gpus"]))
    assert fleets["cheapest"] == best["name"] and best["cheapest"] and best["pareto"]
    assert f"answer: cheapest at 150 req/s: {best['name']}" in done.stdout
    assert fleets["currency"] == "USD"  # the options file names none
    assert f"${best['cost_per_hour']:,.2f}/h" in done.stdout
    assert "wrote reports/cap-fleets/options.html" in done.stdout


def test_no_count_meets_is_an_answer(config: Path, tmp_path: Path) -> None:
    done = run_capacity(str(config), "--at-rate", "10", "--count-max", "2",
                     "--set", "slo.ttft_ms=1", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "answer: none meets: even 2 replicas miss the SLOs at 10 req/s" in done.stdout


TWO_GROUPS = "fleet={replicas: [{count: 1}, {count: 1, gpu: h100-80gb}]}"
GROUP_GPU = "fleet={replicas: [{count: 1, gpu: h100-80gb}]}"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--at-rate", "10", "--set", TWO_GROUPS],
         "cap.yaml fleet.replicas: the replica-count search scales a fleet of one group"),
        (["--at-rate", "10", "--count-min", "4", "--count-max", "2"],
         "need 1 ≤ count_min < count_max, got 4 and 2"),
        (["--at-rate", "0"], "--at-rate: expected a rate > 0 req/s"),
        (["--options", "options.yaml"],
         "--options: belongs to the replica-count search: give --at-rate too"),
        (["--count-max", "8"], "--count-max: belongs to the replica-count search"),
        (["--at-rate", "10", "--rate-max", "8"],
         "--rate-max: searches rates, not replica counts: drop it with --at-rate"),
        (["--at-rate", "10", "--options", "bad.yaml"],
         "bad.yaml:2 options.0.price_per_gpu_hour"),
        (["--at-rate", "10", "--options", "options.yaml", "--set", GROUP_GPU],
         "option a100-tp1: gpu=a100-80gb sets the top-level gpu, which the fleet's group"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2(
    config: Path, tmp_path: Path, args: list[str], expected: str
) -> None:
    (tmp_path / "bad.yaml").write_text("options:\n  - {name: x, price_per_gpu_hour: -1}\n")
    done = run_capacity(str(config), *args, cwd=tmp_path)
    assert done.returncode == 2
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "reports").exists()
