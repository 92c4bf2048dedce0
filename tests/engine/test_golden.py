"""Hand-computed timelines for every scheduler (see tests/engine/helpers.py for the cost).

Each scenario's comment gives the derivation; the assertions pin batch composition per step,
who is preempted, and TTFT/E2EL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.helpers import run, tiny_config

MS = 1e-3


def _steps(out):  # (prefill_tokens, decode_tokens, batch_size, preempted) per step
    s = out.frames.steps
    return list(zip(s.prefill_tokens, s.decode_tokens, s.batch_size, s.preempted, strict=True))


def _req(out, req_id: int) -> dict:
    return out.frames.requests.set_index("req_id").loc[req_id].to_dict()


def test_vllm_v1_preempts_newest_by_recompute(tmp_path: Path) -> None:
    # 3 usable blocks of 4 (4 blocks, block 0 being vLLM V1's null block: vLLM 0.11
    # v1/core/block_pool.py BlockPool.__init__). A = (prompt 4, out 6), B = (4, 4), both at t=0.
    # 1: A 4 + B 4 prefill (1 block each)          18 ms → .018  A,B first token
    # 2: A decode takes the last block; B needs one → B (newest) preempted, recompute.
    #    A alone                                      11 ms → .029
    # 3-5: A decodes; B (5 tokens, 2 blocks) cannot be admitted (1 free)  → .040 .051 .062
    # 6: A takes the freed block, emits its 6th token → .073, finishes, frees 3 blocks
    # 7: B re-prefills 5 tokens (4 recomputed + its sampled one)  15 ms → .088
    # 8, 9: B decodes → .099, .110 finished
    reqs = [(0, 4, 6), (0, 4, 4)]
    cfg = tiny_config(tmp_path, reqs, {"kind": "vllm_v1"}, num_blocks=4, max_model_len=12)
    out = run(cfg, tmp_path)
    assert _steps(out) == [
        (8, 0, 2, 0), (0, 1, 1, 1), (0, 1, 1, 0), (0, 1, 1, 0), (0, 1, 1, 0), (0, 1, 1, 0),
        (5, 0, 1, 0), (0, 1, 1, 0), (0, 1, 1, 0),
    ]  # fmt: skip
    a, b = _req(out, 0), _req(out, 1)
    assert a["first_token_s"] == pytest.approx(18 * MS)
    assert a["finish_s"] == pytest.approx(73 * MS)
    assert b["first_token_s"] == pytest.approx(18 * MS)
    assert b["finish_s"] == pytest.approx(110 * MS)
    assert (a["preemptions"], b["preemptions"], b["recomputed_tokens"]) == (0, 1, 4)
    assert out.frames.steps.time_s.iloc[-1] == pytest.approx(99 * MS)


def test_vllm_v1_mixes_prefill_and_decode(tmp_path: Path) -> None:
    # A = (4, 3) at 0, B = (4, 2) at 5 ms, ample memory.
    # 1: A prefill 4 → .014. 2: A decode + B prefill 4 = 5 tokens → .029. 3: both decode → .041.
    cfg = tiny_config(tmp_path, [(0, 4, 3), (0.005, 4, 2)], {"kind": "vllm_v1"}, num_blocks=8)
    out = run(cfg, tmp_path)
    assert _steps(out) == [(4, 0, 1, 0), (4, 1, 2, 0), (0, 2, 2, 0)]
    assert _req(out, 0)["finish_s"] == pytest.approx(41 * MS)
    assert _req(out, 1)["first_token_s"] - 0.005 == pytest.approx(24 * MS)


def test_vllm_v1_chunks_long_prefill_by_budget(tmp_path: Path) -> None:
    # budget 4 tokens. A = (10, 2). 1: 4 → .014; 2: 4 → .028; 3: 2 → .040 first token;
    # 4: decode → .051 finished.
    sched = {"kind": "vllm_v1", "max_num_batched_tokens": 4}
    out = run(tiny_config(tmp_path, [(0, 10, 2)], sched, num_blocks=8), tmp_path)
    assert _steps(out) == [(4, 0, 1, 0), (4, 0, 1, 0), (2, 0, 1, 0), (0, 1, 1, 0)]
    assert _req(out, 0)["first_token_s"] == pytest.approx(40 * MS)
    assert _req(out, 0)["finish_s"] == pytest.approx(51 * MS)


def test_vllm_v0_separates_prefill_and_decode_steps(tmp_path: Path) -> None:
    # Same requests as the mixing test. 1: prefill A → .014. 2: prefill-only B → .028
    # (A stalls). 3: decode A, B → .040, B done. 4: decode A → .051 done.
    cfg = tiny_config(tmp_path, [(0, 4, 3), (0.005, 4, 2)], {"kind": "vllm_v0"}, num_blocks=8)
    out = run(cfg, tmp_path)
    assert _steps(out) == [(4, 0, 1, 0), (4, 0, 1, 0), (0, 2, 2, 0), (0, 1, 1, 0)]
    assert _req(out, 1)["finish_s"] == pytest.approx(40 * MS)
    assert _req(out, 0)["finish_s"] == pytest.approx(51 * MS)
    itl = out.frames.itl
    # A's second token came 26 ms after its first (stalled by B's prefill step)
    stalled = itl[(itl["count"] == 1) & (itl["itl_s"] > 0.02)]["itl_s"]
    assert list(stalled) == pytest.approx([0.026])


def test_vllm_v0_swaps_out_and_back_in(tmp_path: Path) -> None:
    # 3 blocks of 4, mode swap. A = (4, 6), B = (4, 4). Llama-2-7B: a block of 4 tokens is
    # 2 MiB; one block's swap = 2 · 32 layers · 5 us + 2 MiB / (32 GB/s * 0.8) = 401.92 us.
    # 1: prefill A, B → .018. 2: A takes the last block; B swapped out: 11 ms + 1 swap.
    # 3-5: A decodes; B needs 2 blocks to come back (its block + its next token's), 1 free.
    # 6: A's last token; frees 3. 7: B swapped in and decodes (11 ms + 1 swap) … 9: B done.
    swap = 2 * 32 * 5e-6 + 2 * 2**20 / (32e9 * 0.8)
    cfg = tiny_config(
        tmp_path, [(0, 4, 6), (0, 4, 4)], {"kind": "vllm_v0", "watermark": 0.0},
        num_blocks=3, max_model_len=12, preemption={"mode": "swap"},
    )  # fmt: skip
    kv = cfg.kv_cache.model_copy(update={"swap_space_gib": 0.01})
    cfg = cfg.model_copy(update={"kv_cache": kv})
    out = run(cfg, tmp_path)
    s = out.frames.steps
    assert list(s.swap_out_blocks) == [0, 1, 0, 0, 0, 0, 0, 0, 0]
    assert list(s.swap_in_blocks) == [0, 0, 0, 0, 0, 0, 1, 0, 0]
    assert s.duration_s.iloc[1] == pytest.approx(11 * MS + swap)
    b = _req(out, 1)
    assert (b["swaps"], b["preemptions"], b["recomputed_tokens"]) == (1, 1, 0)
    assert b["finish_s"] == pytest.approx((18 + 11 * 8) * MS + 2 * swap)


def test_vllm_v0_rejects_what_can_never_fit(tmp_path: Path) -> None:
    # 4 blocks of 4 with a 1-block watermark (0.25): a 14-token prompt needs 4 blocks → NEVER.
    sched = {"kind": "vllm_v0", "watermark": 0.25}
    out = run(tiny_config(tmp_path, [(0, 14, 1), (0, 3, 2)], sched, num_blocks=4), tmp_path)
    assert _req(out, 0)["status"] == "rejected"
    assert _req(out, 0)["reason"] == "kv_never_fits"
    assert _req(out, 1)["status"] == "finished"


def test_orca_max_reserves_whole_context(tmp_path: Path) -> None:
    # 32 slots, max_model_len 16: two max reservations fit. A = (4, 3), B = (4, 2), C = (4, 2).
    # 1: A, B prefill 8 → .018. 2: decode 2 → .030, B done. 3: A decode + C prefill 4 → .045,
    # A done. 4: C decode → .056 done.
    sched = {"kind": "orca", "reservation": "max"}
    reqs = [(0, 4, 3), (0, 4, 2), (0, 4, 2)]
    out = run(tiny_config(tmp_path, reqs, sched, num_blocks=8), tmp_path)
    assert _steps(out) == [(8, 0, 2, 0), (0, 2, 2, 0), (4, 1, 2, 0), (0, 1, 1, 0)]
    fin = [_req(out, i)["finish_s"] for i in range(3)]
    assert fin == pytest.approx([45 * MS, 30 * MS, 56 * MS])


def test_orca_oracle_packs_more(tmp_path: Path) -> None:
    # Oracle reserves prompt + output = 6, 6, 6 slots: all three fit in 32 → one prefill step.
    sched = {"kind": "orca", "reservation": "oracle"}
    reqs = [(0, 4, 3), (0, 4, 2), (0, 4, 2)]
    out = run(tiny_config(tmp_path, reqs, sched, num_blocks=8), tmp_path)
    assert _steps(out)[0] == (12, 0, 3, 0)


def test_static_batch_runs_to_completion(tmp_path: Path) -> None:
    # 32 slots, two 16-slot reservations. Batch {A, B}: 1: prefill 2x4 → .018.
    # 2: decode 2 → .030 (B done, waits). 3: A decode + 1 padding row → .042: batch ends, A and
    # B finish at .042. Batch {C}: 4: prefill 4 → .056. 5: decode → .067.
    reqs = [(0, 4, 3), (0, 4, 2), (0, 4, 2)]
    out = run(tiny_config(tmp_path, reqs, {"kind": "static"}, num_blocks=8), tmp_path)
    assert _steps(out) == [(8, 0, 2, 0), (0, 2, 2, 0), (0, 2, 1, 0), (4, 0, 1, 0), (0, 1, 1, 0)]
    fin = [_req(out, i)["finish_s"] for i in range(3)]
    assert fin == pytest.approx([42 * MS, 42 * MS, 67 * MS])
    assert _req(out, 1)["first_token_s"] == pytest.approx(18 * MS)


@pytest.mark.parametrize("reserve_full", [False, True])
def test_vllm_v1_full_prompt_reservation(tmp_path: Path, reserve_full: bool) -> None:
    """vLLM's ``scheduler_reserve_full_isl`` (on in vLLM 0.19's runs; the check in
    ``vllm/v1/core/kv_cache_manager.py`` ``KVCacheManager.allocate_slots`` with
    ``full_sequence_must_fit``): a waiting request is admitted only when blocks for all its
    tokens are free, not just for its first chunk.

    4 usable blocks of 4 (5 with vLLM V1's null block), budget 12. A = (prompt 8, out 2),
    B = (prompt 12, out 2), both at t=0.
    Without the rule (vLLM 0.11): 1: A 8 + B's first chunk 4 (2 + 1 blocks) → .022. 2: A's
    decode takes the last block, B's next chunk finds none → B (newest) preempted; A alone
    → .033, A done. 3: B hits its own first block in the prefix cache and computes 8 → .051.
    4: B decodes → .062: the same finish, but one preemption and 4 recomputed tokens.
    With it: 1: A 8; B needs 3 blocks, 2 free → waits; → .018. 2: A decode → .029, A done.
    3: B 12 → .051. 4: B → .062. No preemption.
    """
    sched = {"kind": "vllm_v1", "max_num_batched_tokens": 12, "reserve_full_prompt": reserve_full}
    cfg = tiny_config(tmp_path, [(0, 8, 2), (0, 12, 2)], sched, num_blocks=5)
    out = run(cfg, tmp_path)
    b = _req(out, 1)
    if reserve_full:
        assert _steps(out) == [(8, 0, 1, 0), (0, 1, 1, 0), (12, 0, 1, 0), (0, 1, 1, 0)]
        assert (b["first_token_s"], b["finish_s"]) == pytest.approx((51 * MS, 62 * MS))
        assert b["preemptions"] == 0
    else:
        assert _steps(out) == [(12, 0, 2, 0), (0, 1, 1, 1), (8, 0, 1, 0), (0, 1, 1, 0)]
        assert (b["first_token_s"], b["finish_s"]) == pytest.approx((51 * MS, 62 * MS))
        assert (b["preemptions"], b["recomputed_tokens"]) == (1, 4)
