"""Prefix caching inside the engine (vllm_v1): hand-computed hits, sharing and conservation."""

from __future__ import annotations

from pathlib import Path

import pytest

from simkv.runner import build_engine
from simkv.workload.content import PromptContent
from simkv.workload.request import Workload
from tests.engine.helpers import tiny_config

MS = 1e-3


def _workload(rows: list[tuple[float, list[tuple[int, int]], int]]) -> Workload:
    outputs = [900 + i for i in range(len(rows))]
    content = PromptContent.from_lists([segs for _, segs, _ in rows], outputs)
    return Workload.from_arrays(
        [a for a, _, _ in rows], [sum(n for _, n in segs) for _, segs, _ in rows],
        [o for _, _, o in rows], source="test", content=content,
    )  # fmt: skip


def _run(tmp_path: Path, rows, caching: str, num_blocks: int = 8):
    cfg = tiny_config(tmp_path, [(0, 1, 1)], {"kind": "vllm_v1"}, num_blocks=num_blocks,
                      max_model_len=32)  # fmt: skip
    kv = cfg.kv_cache.model_copy(update={"prefix_caching": caching})
    cfg = cfg.model_copy(update={"kv_cache": kv})
    engine, _ = build_engine(cfg, tmp_path, check_invariants=True, workload=_workload(rows))
    engine.run()
    return engine, engine.recorder.frames()


@pytest.mark.parametrize("caching", ["hash", "radix"])
def test_a_later_request_reuses_the_cached_prefix(tmp_path: Path, caching: str) -> None:
    # Blocks of 4. R0 = 8 shared tokens + 2 own, output 2: prefill 10 (20 ms), decode (11 ms),
    # finished at .031; its 2 full prompt blocks stay cached after it frees them.
    # R1 at 1 s = the same 8 tokens + 3 own: hits 2 blocks (8 tokens), computes 3 (13 ms).
    rows = [(0.0, [(1, 8), (100, 2)], 2), (1.0, [(1, 8), (101, 3)], 1)]
    _, frames = _run(tmp_path, rows, caching)
    req = frames.requests.set_index("req_id")
    assert list(req.prefix_hit_tokens) == [0, 8]
    assert list(frames.steps.prefill_tokens) == [10, 0, 3]
    assert list(frames.steps.cache_hit_tokens) == [0, 0, 8]
    assert req.loc[1, "first_token_s"] == pytest.approx(1.0 + 13 * MS)
    assert req.loc[1, "generated_tokens"] == req.loc[1, "output_tokens"] == 1


def test_without_caching_nothing_is_reused(tmp_path: Path) -> None:
    rows = [(0.0, [(1, 8), (100, 2)], 2), (1.0, [(1, 8), (101, 3)], 1)]
    _, frames = _run(tmp_path, rows, "none")
    assert list(frames.steps.prefill_tokens) == [10, 0, 11]
    assert frames.requests.prefix_hit_tokens.sum() == 0


def test_hits_on_blocks_in_use_are_shared(tmp_path: Path) -> None:
    # R1 arrives while R0 runs; R0's two full blocks are cached after step 1 (at .020).
    # Step 2: R0 decodes, R1 joins on R0's blocks (refcount 2: 8 slots saved) + 3 new tokens.
    rows = [(0.0, [(1, 8), (100, 2)], 3), (0.005, [(1, 8), (101, 3)], 3)]
    _, frames = _run(tmp_path, rows, "hash")
    steps = frames.steps
    assert list(steps.prefill_tokens[:2]) == [10, 3] and steps.decode_tokens[1] == 1
    assert steps.shared_slots[1] == 8
    assert steps.token_slots[1] == 11 + 11 - 8  # both requests' 11 computed, shared blocks once


def test_whole_prompt_hit_still_computes_one_token(tmp_path: Path) -> None:
    # R1's prompt equals R0's 8 tokens: at most (8 - 1) // 4 = 1 block may hit.
    rows = [(0.0, [(1, 8)], 2), (1.0, [(1, 8)], 1)]
    _, frames = _run(tmp_path, rows, "hash")
    assert frames.requests.set_index("req_id").loc[1, "prefix_hit_tokens"] == 4
    assert list(frames.steps.prefill_tokens) == [8, 0, 4]


def test_small_pool_evicts_and_conserves(tmp_path: Path) -> None:
    rows = [(0.001 * i, [(i % 3, 8), (100 + i, 1 + i % 5)], 1 + i % 4) for i in range(30)]
    for caching in ("hash", "radix"):
        engine, frames = _run(tmp_path, rows, caching, num_blocks=9)
        kv = engine.scheduler.kv
        assert kv.gpu.free_blocks == kv.gpu.num_blocks and kv.shared_tokens == 0
        done = frames.requests
        assert (done.status == "finished").all()
        assert (done.generated_tokens == done.output_tokens).all()
        assert done.prefix_hit_tokens.sum() > 0
