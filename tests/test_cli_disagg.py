"""Prefill/decode disaggregation through the real command: ``simkv run configs/disagg.yaml``
writes the KV path of each request and the TTFT split; every bad input is one located line,
exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from simkv.metrics.disagg import PATH_COLUMNS, TTFT_PARTS
from tests.hostile.cli import one_error, succeeds

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "disagg.yaml"
SHORT = ["--set", "workload.num_requests=60"]


def test_run_writes_the_kv_path_and_the_ttft_split(tmp_path: Path) -> None:
    output = succeeds(["run", str(CONFIG), *SHORT, "--out", str(tmp_path), "--check"])
    assert "Prefill/decode disaggregation" in output and "TTFT: KV transfer" in output
    requests = pd.read_parquet(tmp_path / "requests.parquet")
    assert len(requests) == 60 and set(PATH_COLUMNS) <= set(requests.columns)
    assert set(requests["replica"]) <= {2, 3} and set(requests["prefill_replica"]) == {0, 1}
    summary = json.loads((tmp_path / "summary.json").read_text())
    parts = sum(summary[f"mean_ttft_{part}_ms"] for part in TTFT_PARTS)
    assert parts == pytest.approx(summary["mean_ttft_ms"], rel=1e-9)
    replicas = json.loads((tmp_path / "replicas.json").read_text())
    assert [r["role"] for r in replicas] == ["prefill", "prefill", "decode", "decode"]
    assert sum(r["routed"] for r in replicas[:2]) == 60  # every prompt prefilled remotely
    assert sum(r["kv_bytes_out"] for r in replicas) == summary["kv_transfer_bytes"]


@pytest.mark.parametrize(
    ("item", "place", "words"),
    [
        ("fleet.replicas.1.role=mixed", "disagg.yaml:", "a prefill group needs a decode group"),
        ("fleet.replicas.0.role=decode", "--set fleet.replicas.0.role",
         "a decode group needs a prefill group"),
        ("fleet.disaggregation=null", "disagg.yaml:", "need fleet.disaggregation"),
        ("fleet.disaggregation.link=warp", "--set fleet.disaggregation.link.kind",
         "unknown link kind 'warp'"),
        ("fleet.disaggregation.link.gb_per_s=0", "--set fleet.disaggregation.link.gb_per_s",
         "greater than"),
        ("fleet.disaggregation.link.gb_per_s=-5", "--set fleet.disaggregation.link.gb_per_s",
         "greater than"),
        ("fleet.replicas.1.model=llama-2-7b", "--set fleet.replicas.1.model",
         "prefill and decode pools serve one model"),
        ("fleet.replicas.0.scheduler={kind: vllm_v0}", "--set fleet.replicas.0.scheduler",
         "vllm_v1"),
        ("fleet.replicas.1.kv_cache={num_blocks: 10}", "--set fleet.replicas.1.kv_cache",
         "less than max_model_len"),
        ("fleet.replicas.1.kv_cache={gpu_memory_utilization: 0.19}",
         "--set fleet.replicas.1.kv_cache", "no KV block fits"),
        ("fleet.disaggregation.decider={kind: sometimes}",
         "--set fleet.disaggregation.decider.kind", "'sometimes'"),
        ("fleet.disaggregation.return_kv=maybe", "--set fleet.disaggregation.return_kv",
         "boolean"),
    ],
)  # fmt: skip
def test_bad_input_is_one_located_line(tmp_path: Path, item: str, place: str, words: str) -> None:
    line = one_error(["run", str(CONFIG), "--set", item, "--out", str(tmp_path / "o")], place)
    assert words in line
    assert not (tmp_path / "o").exists()


def test_return_kv_needs_a_prefix_cache_on_the_prefill_side(tmp_path: Path) -> None:
    config = CONFIG.parent / "disagg_multiturn.yaml"
    args = ["run", str(config), "--set", "kv_cache.prefix_caching=none", "--out", str(tmp_path)]
    line = one_error(args, "disagg_multiturn.yaml:")
    assert (
        "fleet.disaggregation.return_kv: prefill group 0 has kv_cache.prefix_caching none" in line
    )


def test_capacity_searches_every_split_of_the_gpus_beside_colocated(tmp_path: Path) -> None:
    out = tmp_path / "splits"
    args = ["capacity", str(CONFIG), "--gpus", "3", "--set", "workload.num_requests=150",
            "--rate-min", "2", "--rate-max", "60", "--tolerance", "0.2",
            "--out", str(out)]  # fmt: skip
    output = succeeds(args)
    record = json.loads((out / "splits.json").read_text())
    names = [row["name"] for row in record["splits"]]
    assert names == ["p1-d2", "p2-d1", "colocated-3"]
    assert [row["gpus"] for row in record["splits"]] == [3, 3, 3]
    for row in record["splits"]:  # each split is a rate search of its own, with its report
        capacity = json.loads((out / row["name"] / "capacity.json").read_text())
        assert capacity["answer_rate"] == row["answer_rate"]
        assert row["goodput_per_gpu"] == pytest.approx(row["answer_rate"] / row["gpus"])
        assert (out / row["name"] / "report.html").exists()
    colocated = json.loads((out / "colocated-3" / "capacity.json").read_text())
    assert "fleet.disaggregation=null" in colocated["set"]
    rates = {row["name"]: row["goodput_per_gpu"] for row in record["splits"]}
    assert record["best"] == max(rates, key=lambda name: (rates[name], -names.index(name)))
    assert f"answer: {record['best']}" in output


@pytest.mark.parametrize(
    ("args", "place", "words"),
    [
        (
            [str(CONFIG.parent / "quickstart.yaml"), "--gpus", "4"],
            "--gpus",
            "one prefill and one decode",
        ),
        ([str(CONFIG), "--gpus", "1"], "--gpus", "expected 2..256 GPUs"),
        ([str(CONFIG), "--gpus", "4", "--at-rate", "10"], "--gpus", "drop it with --at-rate"),
        ([str(CONFIG), "--gpus", "4", "--count-max", "9"], "--count-max", "give --at-rate"),
    ],
)
def test_bad_split_searches_are_one_line(
    tmp_path: Path, args: list[str], place: str, words: str
) -> None:
    line = one_error(["capacity", *args, "--out", str(tmp_path / "o")], place)
    assert words in line
    assert not (tmp_path / "o").exists()
