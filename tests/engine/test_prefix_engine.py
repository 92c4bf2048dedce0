"""Prefix caching inside the engine (vllm_v1): hand-computed hits, sharing and conservation."""

from __future__ import annotations

from pathlib import Path

import pytest

from simkv.workload.content import PromptContent
from simkv.workload.request import Workload
from tests.engine.helpers import build_engine, tiny_config

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
        assert kv.gpu.free_blocks == kv.gpu.num_blocks - 1  # the null block
        assert kv.sums.shared_tokens == 0
        done = frames.requests
        assert (done.status == "finished").all()
        assert (done.generated_tokens == done.output_tokens).all()
        assert done.prefix_hit_tokens.sum() > 0


def test_multi_turn_session_is_closed_loop_and_hits_the_previous_answer(tmp_path: Path) -> None:
    # Turn 0: prompt 8 (segment 1), answer 5 tokens (segment 900): prefill 18 ms, 4 decodes of
    # 11 ms → leaves at .062; its KV (8 + 4 tokens) fills 3 blocks, all cached.
    # Turn 1 arrives 0.5 s later (.562): prompt = segment 1 (8) + the answer (5) + 3 new = 16;
    # at most 15 tokens may hit → 3 blocks (12 tokens); it computes 4 (14 ms) → .576.
    content = PromptContent.from_lists([[(1, 8)], [(1, 8), (900, 5), (2, 3)]], [900, 901])
    workload = Workload.from_arrays(
        [0.0, 0.0], [8, 16], [5, 1], source="test", content=content,
        session_id=[0, 0], turn=[0, 1], think_s=[0.0, 0.5],
    )  # fmt: skip
    cfg = tiny_config(tmp_path, [(0, 1, 1)], {"kind": "vllm_v1"}, num_blocks=8, max_model_len=32)
    engine, _ = build_engine(cfg, tmp_path, check_invariants=True, workload=workload)
    engine.run()
    req = engine.recorder.frames().requests.set_index("req_id")
    assert req.loc[0, "finish_s"] == pytest.approx(62 * MS)
    assert req.loc[1, "arrival_s"] == pytest.approx(0.562)
    assert req.loc[1, "prefix_hit_tokens"] == 12
    assert req.loc[1, "finish_s"] == pytest.approx(0.576)


@pytest.mark.parametrize(("seed", "num_blocks"), [(1, 110), (2, 110), (3, 110), (4, 300)])
def test_contentless_requests_cached_by_owner_match_the_key_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, num_blocks: int
) -> None:
    """Requests without content keep their cached blocks without per-block map entries (FIFO
    reuse); a tight pool (preemptions, re-hits, evictions) gives the same frames as keying
    every block in the map."""
    import functools

    import pandas as pd
    import yaml

    from simkv.config.sim import SimConfig
    from simkv.engine.memory import paged as paged_kv
    from simkv.kv.hash_cache import HashPrefixCache

    data = {
        "name": "owner", "seed": seed,
        "workload": {
            "kind": "synthetic", "num_requests": 150, "arrival": {"kind": "poisson", "rate": 8.0},
            "prompt_tokens": {"kind": "lognormal", "mean": 300, "median": 200, "max": 900},
            "output_tokens": {"kind": "lognormal", "mean": 120, "median": 60, "max": 400},
        },
        "model": {"preset": "llama-2-7b", "max_model_len": 1400},
        "gpu": "a100-40gb",
        "kv_cache": {"block_size": 16, "num_blocks": num_blocks, "prefix_caching": "hash"},
        "scheduler": {"kind": "vllm_v1", "max_num_batched_tokens": 1024},
    }  # fmt: skip
    cfg = SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))

    def frames(by_owner: bool):
        factory = functools.partial(HashPrefixCache, by_owner=by_owner)
        monkeypatch.setattr(paged_kv, "HashPrefixCache", factory)
        engine, _ = build_engine(cfg, tmp_path)
        engine.run()
        assert engine.scheduler.kv.cache.by_owner is by_owner  # type: ignore[attr-defined]
        return engine.recorder.frames()

    owner, keyed = frames(True), frames(False)
    pd.testing.assert_frame_equal(owner.requests, keyed.requests, check_exact=True)
    pd.testing.assert_frame_equal(owner.steps, keyed.steps, check_exact=True)
    assert owner.requests["preemptions"].sum() > 0
    assert owner.requests["cache_hit_tokens"].sum() > 0  # re-hits after preemption
    assert owner.steps["evictions"].iloc[-1] > 0 and owner.steps["cached_blocks"].max() > 0


def test_a_new_eviction_policy_runs_through_paged_kv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A policy implementing the ``PrefixCache`` protocol (the test's ``NewestFirstCache``)
    plugs into PagedKV with nothing else changed; every invariant holds after every step."""
    from simkv.engine.memory import paged as paged_kv
    from tests.kv.test_prefix_cache import NewestFirstCache

    monkeypatch.setattr(paged_kv, "HashPrefixCache", lambda n, reuse: NewestFirstCache(n))
    rows = [(0.001 * i, [(i % 3, 8), (100 + i, 1 + i % 5)], 1 + i % 4) for i in range(30)]
    engine, frames = _run(tmp_path, rows, "hash", num_blocks=9)
    kv = engine.scheduler.kv
    assert isinstance(kv.cache, NewestFirstCache)
    assert kv.gpu.free_blocks == kv.gpu.num_blocks - 1 and kv.sums.shared_tokens == 0  # null block
    done = frames.requests
    assert (done.status == "finished").all()
    assert (done.generated_tokens == done.output_tokens).all()
    assert done.prefix_hit_tokens.sum() > 0
    assert frames.steps["evictions"].iloc[-1] == kv.cache.evictions > 0
