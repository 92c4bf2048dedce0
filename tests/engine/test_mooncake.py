"""Prefix caching on the bundled Mooncake trace against hit counts computed from its hash_ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simkv.run import load_config, simulate

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "traces" / "mooncake" / "synthetic_trace.jsonl"
CONFIG = ROOT / "configs" / "mooncake.yaml"
UNIT = 512
N = 250


def direct_hit_tokens(block_size: int, n: int) -> list[int]:
    """For each request, in order: the longest prefix already written by an earlier request,
    from the hash_ids alone (same id at the same position = same content), as whole blocks,
    never the whole prompt."""
    rows = [json.loads(line) for line in TRACE.read_text().splitlines()[:n]]
    seen: dict[tuple[int, ...], int] = {}  # id prefix → most tokens of its last unit written
    hits = []
    for row in rows:
        ids, length = row["hash_ids"], row["input_length"]
        unit_len = [UNIT] * (len(ids) - 1) + [length - UNIT * (len(ids) - 1)]
        matched = 0
        for k in range(len(ids)):
            written = seen.get(tuple(ids[: k + 1]))
            if written is None:
                break
            matched = UNIT * k + min(written, unit_len[k])
            if written < unit_len[k] or unit_len[k] < UNIT:
                break  # the match ends inside this unit
        hits.append(min(matched, length - 1) // block_size * block_size)
        for k in range(len(ids)):
            key = tuple(ids[: k + 1])
            seen[key] = max(seen.get(key, 0), unit_len[k])
    return hits


@pytest.mark.parametrize("caching", ["hash", "radix"])
def test_unbounded_cache_hits_equal_the_hash_id_prefixes(caching: str) -> None:
    # one request at a time (arrivals 1000x apart) and a pool that never evicts
    cfg = load_config(CONFIG, [
        f"workload.limit={N}", "workload.time_scale=1000", "kv_cache.num_blocks=600000",
        f"kv_cache.prefix_caching={caching}",
    ])  # fmt: skip
    out = simulate(cfg, CONFIG.parent)
    req = out.frames.requests.sort_values("req_id")
    assert out.summary["evictions"] == 0
    assert list(req["prefix_hit_tokens"]) == direct_hit_tokens(16, N)
    admitted = req["first_scheduled_s"].notna()
    expected = sum(direct_hit_tokens(16, N)) / int(req.loc[admitted, "prompt_tokens"].sum())
    assert out.summary["prefix_hit_rate"] == pytest.approx(expected)
    assert sum(direct_hit_tokens(16, N)) > 100_000  # the trace really shares prefixes


def test_bounded_caches_hit_less_as_capacity_shrinks() -> None:
    rates = []
    for blocks in (600000, 40000, 12000):
        cfg = load_config(CONFIG, [
            f"workload.limit={N}", "workload.time_scale=1000", f"kv_cache.num_blocks={blocks}",
            "model.max_model_len=65536",
        ])  # fmt: skip
        rates.append(simulate(cfg, CONFIG.parent).summary["prefix_hit_rate"])
    assert rates[0] > rates[1] > rates[2]
