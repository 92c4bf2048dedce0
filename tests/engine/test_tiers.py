"""KV offload tiers in the engine, hand-computed (simkv.engine.tiers, simkv.engine.tier_net).

The semantics follow vLLM's ``OffloadingConnector`` (0.11+,
``distributed/kv_transfer/kv_connector/v1/offloading_connector.py``): full blocks are stored
as computed (write-through) or as HBM evicts them; a waiting request's blocks after its HBM
hits are looked up in the tiers and loaded before it runs (``WAITING_FOR_REMOTE_KVS``), the
load priced at latency + bytes / bandwidth on its TTFT path.

Every scenario: Llama-2-7B's shapes (524,288 KV bytes per token, so a block of 4 tokens is
2,097,152 bytes), a step of n tokens takes 10 + n ms, 5 GPU blocks (4 usable beside vLLM's null
block: one 16-token request fills them), and tiers moving 6.291456 GB/s (three blocks a
millisecond) with 1 ms latency. Request A (13 tokens, Mooncake hash id 1) runs at 0 ms; B
(13 tokens, other content) at 30 ms takes every GPU block, evicting A's cached blocks; A2 (A's
prompt again) arrives at 60 ms.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simkv.config.sim import SimConfig
from simkv.run import simulate
from tests.engine.helpers import tiny_document

MS = 1e-3
BLOCK_BYTES = 4 * 524_288
FAST = {"read_gb_per_s": 6.291456, "write_gb_per_s": 6.291456, "latency_us": 1000}


def _config(
    tmp_path: Path,
    tiers: list[dict[str, Any]],
    rows: list[tuple[float, int, int]] | None = None,
    num_blocks: int = 5,
    output: int = 1,
) -> SimConfig:
    trace = tmp_path / "trace.jsonl"
    rows = rows or [(0, 1, 13), (30, 2, 13), (60, 1, 13)]
    lines = [
        {"timestamp": ms, "input_length": n, "output_length": output, "hash_ids": [h]}
        for ms, h, n in rows
    ]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    workload = {"kind": "trace", "path": str(trace), "format": "mooncake"}
    data = tiny_document(
        tmp_path, "tiers", workload, {"kind": "vllm_v1"}, num_blocks=num_blocks, block_size=4,
        max_model_len=16,
    )  # fmt: skip
    data["kv_cache"].update(prefix_caching="hash", tiers=tiers)
    return SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))


def _run(cfg: SimConfig, tmp_path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    out = simulate(cfg, tmp_path, check_invariants=True)
    return out.requests.set_index("req_id"), out.summary


def _close(got: float, want: float) -> None:
    assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), (got, want)


def _cpu(**extra: Any) -> dict[str, Any]:
    return {"kind": "cpu", "capacity_blocks": 8, **FAST, **extra}


def test_without_tiers_a2_recomputes_its_prompt(tmp_path: Path) -> None:
    requests, _ = _run(_config(tmp_path, []), tmp_path)
    _close(requests.loc[2, "first_token_s"], 83 * MS)  # 60 + 10 + 13
    assert requests.loc[2, "prefix_hit_tokens"] == 0
    assert "hit_tokens_cpu" not in requests


def test_write_through_cpu_hit_costs_latency_plus_bytes_over_bandwidth(tmp_path: Path) -> None:
    # A's 3 full blocks are stored after its step (ends 23 ms). At 60 ms A2 finds none in HBM
    # (B took every block) and all 3 (12 tokens, at most num_tokens - 1) in the CPU tier: its
    # load is 1 ms + 3 blocks at 3 blocks/ms = 2 ms, to 62 ms; then its last prompt token
    # runs (11 ms): first token at 73 ms instead of 83 ms
    requests, summary = _run(_config(tmp_path, [_cpu()]), tmp_path)
    a2 = requests.loc[2]
    assert a2["hit_tokens_cpu"] == 12 and a2["prefix_hit_tokens"] == 12
    _close(a2["tier_load_start_s"], 60 * MS)
    _close(a2["tier_load_end_s"], 62 * MS)
    _close(a2["first_scheduled_s"], 62 * MS)
    _close(a2["first_token_s"], 73 * MS)
    assert summary["tier_loaded_bytes_cpu"] == 3 * BLOCK_BYTES
    # stored: A's 3 blocks and B's 3 (A2's loaded blocks are not stored again)
    assert summary["tier_stored_bytes_cpu"] == 6 * BLOCK_BYTES
    assert summary["tier_hit_requests_cpu"] == 1 and summary["tier_loads"] == 1


@pytest.mark.parametrize(("blocks", "stored"), [("prompt_and_output", 3), ("prompt", 2)])
def test_stored_blocks_prompt_stores_the_prompt_alone(
    tmp_path: Path, blocks: str, stored: int
) -> None:
    # one request of 9 prompt tokens and 6 output tokens computes 9 + 5 = 14 tokens: 3 full
    # blocks of 4 (vLLM's OffloadingConnector stores all 3), 2 of them the prompt's (LMCache's
    # save_decode_cache: false stores those alone)
    cfg = _config(tmp_path, [_cpu(stored_blocks=blocks)], rows=[(0, 1, 9)], output=6)
    _, summary = _run(cfg, tmp_path)
    assert summary["tier_stored_bytes_cpu"] == stored * BLOCK_BYTES


def test_a_block_evicted_from_hbm_is_found_in_cpu(tmp_path: Path) -> None:
    # on eviction: A's blocks reach the CPU tier only when B's admission (30 ms) evicts them
    # from HBM; they are ready at 32 ms, and A2 loads them as above
    tiers = [_cpu(store="on_evict")]
    requests, summary = _run(_config(tmp_path, tiers), tmp_path)
    assert requests.loc[2, "hit_tokens_cpu"] == 12
    _close(requests.loc[2, "first_token_s"], 73 * MS)
    # B's blocks were evicted by A2's reservation: stored too (A's 3, then B's 3)
    assert summary["tier_stored_bytes_cpu"] == 6 * BLOCK_BYTES


def test_a_disk_hit_is_priced_at_the_disk(tmp_path: Path) -> None:
    # a CPU tier of 3 blocks keeps only B's blocks by 60 ms; the disk below it (write-through
    # from the CPU tier) still has A's, read at 0.6291456 GB/s (3 blocks in 10 ms) after 1 ms:
    # A2's load ends at 71 ms, its first token at 82 ms
    disk = {"kind": "disk", "capacity_blocks": 16, "read_gb_per_s": 0.6291456,
            "write_gb_per_s": 6.291456, "latency_us": 1000}  # fmt: skip
    tiers = [_cpu(capacity_blocks=3), disk]
    requests, summary = _run(_config(tmp_path, tiers), tmp_path)
    a2 = requests.loc[2]
    assert a2["hit_tokens_cpu"] == 0 and a2["hit_tokens_disk"] == 12
    _close(a2["tier_load_end_s"], 71 * MS)
    _close(a2["first_token_s"], 82 * MS)
    assert summary["tier_evicted_blocks_cpu"] == 3


def test_halving_the_bandwidth_moves_the_load_not_the_hits(tmp_path: Path) -> None:
    slow = _cpu(read_gb_per_s=3.145728)
    requests, _ = _run(_config(tmp_path, [slow]), tmp_path)
    assert requests.loc[2, "hit_tokens_cpu"] == 12
    _close(requests.loc[2, "tier_load_end_s"], 63 * MS)  # 1 ms + 2 ms


def test_concurrent_loads_share_the_tier(tmp_path: Path) -> None:
    # 6 usable GPU blocks; two requests of 9 tokens at 30 ms take them all, evicting A's; two
    # requests with the first 9 tokens of A's prompt at 60 ms load 2 blocks each, sharing
    # the CPU tier's read bandwidth (1.5 blocks/ms each): both end at 60 + 1 + 4/3 ms
    rows = [(0, 1, 13), (30, 2, 9), (30, 3, 9), (60, 1, 9), (60, 1, 9)]
    requests, _ = _run(_config(tmp_path, [_cpu()], rows, num_blocks=7), tmp_path)
    for i in (3, 4):
        assert requests.loc[i, "hit_tokens_cpu"] == 8
        _close(requests.loc[i, "tier_load_end_s"], (61 + 4 / 3) * MS)


def test_same_config_same_frames(tmp_path: Path) -> None:
    cfg = _config(tmp_path, [_cpu(eviction="arc")])
    first = simulate(cfg, tmp_path)
    again = simulate(cfg, tmp_path, fast_forward=False)
    pd.testing.assert_frame_equal(first.requests, again.requests)
    pd.testing.assert_frame_equal(first.frames.tiers, again.frames.tiers)


@pytest.mark.parametrize("eviction", ["lru", "arc", "frequency"])
def test_shipped_config_keeps_every_invariant(tmp_path: Path, eviction: str) -> None:
    cfg = SimConfig.model_validate(
        yaml.safe_load(Path("configs/tiers.yaml").read_text()) | {"name": "t"}
    )
    workload = cfg.workload.model_copy(update={"num_sessions": 12})
    # small pools: HBM and the CPU tier evict, and the disk tier gets hits too
    tiers = [
        t.model_copy(update={"eviction": eviction, "capacity_gib": gib})
        for t, gib in zip(cfg.kv_cache.tiers, (0.25, 4), strict=True)
    ]
    kv = cfg.kv_cache.model_copy(update={"tiers": tiers, "capacity_gib": 1})
    cfg = cfg.model_copy(update={"workload": workload, "kv_cache": kv})
    out = simulate(cfg, Path("configs"), check_invariants=True)
    assert out.summary["tier_loads"] > 0 and out.summary["tier_hit_requests_disk"] > 0
    assert (out.requests["status"] == "finished").all()


def test_a_fleet_shares_its_remote_tier(tmp_path: Path) -> None:
    # two replicas behind round robin, no tier of their own, one remote tier: A runs on
    # replica 0 and its blocks are stored in the remote tier (ready at 25 ms); A2 (60 ms)
    # goes to replica 1, whose HBM never saw them, and loads them from the remote tier
    cfg = _config(tmp_path, [], [(0, 1, 13), (60, 1, 13)])
    data = cfg.model_dump(mode="json", exclude_none=True)
    data["fleet"] = {
        "router": {"kind": "round_robin"},
        "replicas": [{"name": "r", "count": 2}],
        "remote_tier": {"kind": "remote", "capacity_blocks": 8, **FAST},
    }
    requests, summary = _run(SimConfig.model_validate(data), tmp_path)
    a2 = requests.loc[1]
    assert a2["replica"] == 1 and a2["hit_tokens_remote"] == 12
    _close(a2["tier_load_end_s"], 62 * MS)
    _close(a2["first_token_s"], 73 * MS)
    assert summary["tier_stored_bytes_remote"] == 3 * BLOCK_BYTES
    assert summary["tier_loaded_bytes_remote"] == 3 * BLOCK_BYTES


@pytest.mark.parametrize(("weights", "replica"), [(None, 1), ({"cpu": 0.8}, 0)])
def test_a_tier_aware_router_follows_the_prefix_into_the_cpu_tier(
    tmp_path: Path, weights: dict[str, float] | None, replica: int
) -> None:
    # prefix-aware routing over two replicas with a CPU tier each: A and B run on replica 0
    # (idle ties go to the lower index), B evicting A's blocks from its HBM; C (55 ms) keeps
    # replica 0's pool half used. A2 (60 ms) hits no HBM: by HBM hits alone it goes to the
    # less used replica 1; counting CPU-tier hits (12 tokens × 0.8 > half its prompt) it goes
    # where A's blocks are
    rows = [(0, 1, 13), (30, 2, 13), (55, 3, 5), (60, 1, 13)]
    cfg = _config(tmp_path, [_cpu(capacity_blocks=16)], rows)  # (room for C's output blocks)
    data = cfg.model_dump(mode="json", exclude_none=True)
    router: dict[str, Any] = {"kind": "prefix_aware"}
    if weights is not None:
        router["tier_weights"] = weights
    data["fleet"] = {"router": router, "replicas": [{"name": "r", "count": 2}]}
    trace = tmp_path / "trace.jsonl"
    lines = trace.read_text().splitlines()
    lines[2] = lines[2].replace('"output_length": 1', '"output_length": 20')
    trace.write_text("\n".join(lines) + "\n")
    requests, _ = _run(SimConfig.model_validate(data), tmp_path)
    assert list(requests["replica"].iloc[:3]) == [0, 0, 0]
    assert requests.loc[3, "replica"] == replica
    assert requests.loc[3, "hit_tokens_cpu"] == (12 if replica == 0 else 0)
