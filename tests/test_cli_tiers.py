"""KV offload tiers through the real command: ``simkv run configs/tiers.yaml`` writes the tier
columns, the tiers frame and the report's tier section; every bad input is one located line,
exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.hostile.cli import one_error, succeeds

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "tiers.yaml"
SHORT = ["--set", "workload.num_sessions=40", "--set", "workload.arrival.rate=2"]


def test_run_writes_tier_hits_loads_and_the_report(tmp_path: Path) -> None:
    output = succeeds(["run", str(CONFIG), *SHORT, "--out", str(tmp_path), "--check"])
    assert "KV offload tiers" in output and "CPU tier: hit rate" in output
    requests = pd.read_parquet(tmp_path / "requests.parquet")
    for name in ("hit_tokens_cpu", "hit_tokens_disk", "tier_load_start_s", "tier_load_ms"):
        assert name in requests.columns
    loaded = requests[requests["hit_tokens_cpu"] > 0]
    assert len(loaded) and (loaded["tier_load_ms"] > 0).all()
    # a load ends before its request is scheduled again, and its hits are prefix hits
    assert (loaded["tier_load_end_s"] <= loaded["first_scheduled_s"]).all()
    assert (loaded["prefix_hit_tokens"] >= loaded["hit_tokens_cpu"]).all()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["tier_hit_requests_cpu"] == len(loaded)
    tiers = pd.read_parquet(tmp_path / "tiers.parquet")
    assert set(tiers["tier"]) <= {"cpu", "disk"} and tiers["blocks"].max() > 0
    html = (tmp_path / "report.html").read_text()
    for marker in ("card-tier-cpu", "card-tier-load", "fig-tier-sources", "fig-tier-time"):
        assert marker in html


def test_without_tiers_nothing_changes_shape(tmp_path: Path) -> None:
    succeeds(["run", str(CONFIG), *SHORT, "--set", "kv_cache.tiers=[]", "--out", str(tmp_path)])
    requests = pd.read_parquet(tmp_path / "requests.parquet")
    assert not any(c.startswith("hit_tokens_") for c in requests.columns)
    assert not (tmp_path / "tiers.parquet").exists()


@pytest.mark.parametrize(
    ("item", "place", "words"),
    [
        ("kv_cache.tiers.0.capacity_gib=0.000001", "--set kv_cache.tiers.0.capacity_gib",
         "holds less than one block"),
        ("kv_cache.tiers.0.capacity_blocks=0", "--set kv_cache.tiers.0.capacity_blocks",
         "greater than or equal to 1"),
        ("kv_cache.tiers.1.read_gb_per_s=0", "--set kv_cache.tiers.1.read_gb_per_s",
         "greater than or equal"),
        ("kv_cache.tiers.1.write_gb_per_s=-3", "--set kv_cache.tiers.1.write_gb_per_s",
         "greater than or equal"),
        ("kv_cache.tiers.0.eviction=mru", "--set kv_cache.tiers.0.eviction", "'lru', 'arc'"),
        ("kv_cache.tiers.1.medium=tape", "--set kv_cache.tiers.1.medium", "unknown medium"),
        ("kv_cache.tiers.1.medium=pcie5", "kv_cache.tiers.1", "is a cpu medium"),
        ("kv_cache.tiers=[{kind: remote, capacity_gib: 9, medium: rdma_200g}]",
         "--set kv_cache.tiers", "give it as fleet.remote_tier"),
        ("kv_cache.tiers=[{kind: cpu, capacity_gib: 1}, {kind: cpu, capacity_gib: 2}]",
         "--set kv_cache.tiers", "each at most once"),
        ("kv_cache.prefix_caching=none", "tiers.yaml:", "KV tiers need"),
        ("kv_cache.tiers.0.store=sometimes", "--set kv_cache.tiers.0.store", "'write_through'"),
        ("kv_cache.tiers.1.stored_blocks=prompt", "kv_cache.tiers",
         "the first one holds) (with --set kv_cache.tiers.1.stored_blocks)"),
        ("kv_cache.tiers.0.stored_blocks=outputs", "--set kv_cache.tiers.0.stored_blocks",
         "'prompt_and_output'"),
        ("kv_cache.tiers=[{kind: cpu, capacity_gib: 1, store: on_evict, stored_blocks: prompt}]",
         "--set kv_cache.tiers", "needs store: write_through"),
    ],
)  # fmt: skip
def test_bad_input_is_one_located_line(tmp_path: Path, item: str, place: str, words: str) -> None:
    line = one_error(["run", str(CONFIG), "--set", item, "--out", str(tmp_path / "o")], place)
    assert words in line
    assert not (tmp_path / "o").exists()
