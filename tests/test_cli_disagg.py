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
    ],
)  # fmt: skip
def test_bad_input_is_one_located_line(tmp_path: Path, item: str, place: str, words: str) -> None:
    line = one_error(["run", str(CONFIG), "--set", item, "--out", str(tmp_path / "o")], place)
    assert words in line
    assert not (tmp_path / "o").exists()
