"""The prefill:decode split search through the real command with a money budget, TP degrees
per side and each executor: splits.json and the terminal rank by goodput per GPU and per cost,
splits.html names the answer and links each split's report, the serial, process-pool and ray
executors write the same files, and bad split options are one located line, exit 2."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from tests.hostile.cli import one_error, succeeds

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "disagg.yaml"
TINY = ["--set", "workload.num_requests=60", "--rate-min", "2", "--rate-max", "40",
        "--tolerance", "0.3"]  # fmt: skip


def test_a_money_budget_ranks_the_splits_by_goodput_per_cost(tmp_path: Path) -> None:
    out = tmp_path / "s"
    output = succeeds(["capacity", str(CONFIG), *TINY, "--budget-per-hour", "7",
                       "--price-per-gpu-hour", "2.5,2", "--tp-decode", "1,2",
                       "--out", str(out)])  # fmt: skip
    record = json.loads((out / "splits.json").read_text())
    # $7/h: prefill GPUs $2.50, decode $2: TP 1 → p1-d2 ($6.50), p2-d1 ($7); TP 2 → p1-d1
    # ($6.50); colocated: 3 at TP 1 ($6), 1 at TP 2 ($4)
    names = [row["name"] for row in record["splits"]]
    assert names == ["p1tp1-d2tp1", "p2tp1-d1tp1", "p1tp1-d1tp2", "colocated-3tp1",
                     "colocated-1tp2"]  # fmt: skip
    assert [row["cost_per_hour"] for row in record["splits"]] == [6.5, 7.0, 6.5, 6.0, 4.0]
    assert record["ranked_by"] == "goodput_per_cost" and record["budget_per_hour"] == 7.0
    per_cost = {}
    for row in record["splits"]:
        assert row["goodput_per_cost"] == pytest.approx(row["answer_rate"] / row["cost_per_hour"])
        assert row["goodput_per_gpu"] == pytest.approx(row["answer_rate"] / row["gpus"])
        per_cost[row["name"]] = row["goodput_per_cost"]
    assert record["best"] == max(names, key=lambda n: (per_cost[n], -names.index(n)))
    colocated = max(per_cost[n] for n in names if n.startswith("colocated"))
    if not record["best"].startswith("colocated"):
        assert record["over_colocated"] == pytest.approx(per_cost[record["best"]] / colocated)
    assert output.index("plan: 5 splits") < output.index("answer: " + record["best"])
    assert "req/s/$/h" in output and f"wrote {out / 'splits.html'}" in output
    page = (out / "splits.html").read_text()
    assert f"Best split: {record['best']}" in page
    for name in names:  # each split's own report, linked from the page
        assert (out / name / "report.html").exists() and f'href="{name}/report.html"' in page


def _search(folder: Path, *executor: str) -> Path:
    folder = folder / "splits"  # one folder name: the page's title names it
    succeeds(["capacity", str(CONFIG), *TINY, "--gpus", "2", *executor, "--out", str(folder)])
    return folder


def _same_files(a: Path, b: Path) -> None:
    for name in ("splits.json", "splits.html", "p1-d1/capacity.json",
                 "colocated-2/capacity.json", "p1-d1/sweep.json"):  # fmt: skip
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_the_process_pool_writes_the_same_split_search_as_serial(tmp_path: Path) -> None:
    serial = _search(tmp_path / "serial")
    assert json.loads((serial / "splits.json").read_text())["best"] is not None
    _same_files(serial, _search(tmp_path / "process", "--executor", "process", "--jobs", "2"))


def test_ray_writes_the_same_split_search_as_serial(tmp_path: Path) -> None:
    if importlib.util.find_spec("ray") is None:
        if os.environ.get("SIMKV_REQUIRE_RAY") == "1":
            pytest.fail("SIMKV_REQUIRE_RAY=1 but ray is not installed")
        pytest.skip("ray is not installed (pip install -e '.[ray]'); SIMKV_REQUIRE_RAY=1 fails")
    serial = _search(tmp_path / "serial")
    _same_files(serial, _search(tmp_path / "ray", "--executor", "ray", "--jobs", "2"))


@pytest.mark.parametrize(
    ("args", "place", "words"),
    [
        (["--budget-per-hour", "1", "--price-per-gpu-hour", "2"], "--budget-per-hour",
         "1 per hour fit no prefill replica"),
        (["--budget-per-hour", "10"], "--budget-per-hour", "needs --price-per-gpu-hour"),
        (["--gpus", "4", "--tp-prefill", "3"], "--tp-prefill", "TP 3: group 0"),
        (["--gpus", "4", "--tp-decode", "0"], "--tp-decode", "comma list of TP degrees"),
        (["--gpus", "4", "--tp-decode", "1,1"], "--tp-decode", "listed twice"),
        (["--gpus", "2", "--tp-prefill", "2"], "--gpus", "fit no prefill replica (TP 2)"),
        (["--tp-decode", "2"], "--budget-per-hour", "needs --gpus or --budget-per-hour"),
        (["--gpus", "4", "--price-per-gpu-hour", "free"], "--price-per-gpu-hour", "'free'"),
        (["--budget-per-hour", "5", "--price-per-gpu-hour", "1", "--at-rate", "3"],
         "--budget-per-hour", "drop it with --at-rate"),
    ],
)  # fmt: skip
def test_bad_split_options_are_one_line(
    tmp_path: Path, args: list[str], place: str, words: str
) -> None:
    line = one_error(["capacity", str(CONFIG), *args, "--out", str(tmp_path / "o")], place)
    assert words in line
    assert not (tmp_path / "o").exists()


def test_a_ray_address_where_nothing_listens_is_one_line_before_any_split(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    args = ["capacity", str(CONFIG), "--gpus", "2", "--executor", "ray", "--ray-address",
            "127.0.0.1:1", "--out", str(tmp_path / "o")]  # fmt: skip
    assert "no ray cluster answers at 127.0.0.1:1" in one_error(args, "--ray-address")
    assert not (tmp_path / "o").exists()
