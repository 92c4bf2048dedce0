"""Multi-sequence requests under vllm_v0: parallel sampling, tree of thought, beam search.

Cost as in tests/engine/helpers.py: a step of n tokens takes 10 + n ms. Llama-2-7B with blocks
of 4 tokens: a block is 2 MiB; a copy-on-write copy costs 2 · 2 MiB / (2039 GB/s · 0.8) and a
swap 2 · 32 layers · 5 us + 2 MiB / (32 GB/s · 0.8) per block.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simkv.config.sim import SimConfig
from simkv.config.workload import BeamSampling, ParallelSampling, check_sampling_scheduler
from simkv.engine.memory.forks import decode_blocks_needed
from simkv.engine.request.fork_group import ForkGroup
from simkv.errors import InputError
from simkv.kv.block_table import SequenceTable
from simkv.metrics.summary import summarize
from simkv.run import RunOutput
from simkv.workload.build import build_workload
from simkv.workload.request import Workload
from tests.engine.helpers import build_engine, run, tiny_config

MS = 1e-3
COPY_S = 2 * 2 * 2**20 / (2039e9 * 0.8)
SWAP_S = 2 * 32 * 5e-6 + 2 * 2**20 / (32e9 * 0.8)
V0 = {"kind": "vllm_v0", "watermark": 0.0}


def _with_sampling(cfg: SimConfig, sampling: Any) -> SimConfig:
    workload = cfg.workload.model_copy(update={"sampling": sampling})
    return cfg.model_copy(update={"workload": workload})


def _col(out: RunOutput, name: str) -> list[int]:
    return [int(v) for v in out.frames.steps[name]]


def _req(out: RunOutput, req_id: int) -> dict:
    return out.frames.requests.set_index("req_id").loc[req_id].to_dict()


def test_parallel_sampling_n2_golden(tmp_path: Path) -> None:
    # Blocks of 4. A = (prompt 6, output 4), n = 2.
    # 1: prefill 6 → 16 ms; 2 blocks [4 | 2]; 2 first tokens; fork: both share both blocks.
    # 2: each sequence writes token 6 into the shared partial block: the first copies it
    #    (1 copy), the second finds it unshared: 3 blocks. 2 decodes → 12 ms + 1 copy.
    # 3: token 7 in each private block → 12 ms (blocks full). 4: 2 new blocks → 12 ms, done.
    cfg = tiny_config(tmp_path, [(0, 6, 4)], V0, num_blocks=8)
    out = run(_with_sampling(cfg, ParallelSampling(kind="parallel", n=2)), tmp_path)
    assert _col(out, "prefill_tokens") == [6, 0, 0, 0]
    assert _col(out, "decode_tokens") == [0, 2, 2, 2]
    assert _col(out, "batch_size") == [1, 2, 2, 2]
    assert _col(out, "copy_blocks") == [0, 1, 0, 0]
    assert _col(out, "blocks_used") == [2, 3, 3, 0]
    assert _col(out, "fork_blocks") == [2, 3, 3, 0]
    assert _col(out, "fork_blocks_independent") == [4, 4, 4, 0]
    assert _col(out, "token_slots") == [6, 10, 12, 0]  # a shared block counts once
    a = _req(out, 0)
    assert a["first_token_s"] == pytest.approx(16 * MS)
    assert a["finish_s"] == pytest.approx(52 * MS + COPY_S)
    assert (a["generated_tokens"], a["num_seqs"]) == (8, 2)
    d = [16 * MS, 12 * MS + COPY_S, 12 * MS]
    saving = 1 - (2 * d[0] + 3 * d[1] + 3 * d[2]) / (4 * sum(d))
    assert out.summary["mean_fork_saving"] == pytest.approx(saving)
    assert out.summary["output_throughput"] == pytest.approx(8 / a["finish_s"])


def test_tree_of_thought_forks_after_parent_tokens(tmp_path: Path) -> None:
    # A = (6, 5), n = 3, fork after 2 tokens. 1: prefill → 16 ms. 2, 3: the parent decodes
    # alone (11 ms each); step 3 samples token 3 = the children's first: fork at length 8
    # (2 full shared blocks, no copy). 4: 3 new blocks, 3 decodes → 13 ms. 5: 13 ms, done.
    # Generated: 2 + 3 · 3 = 11. Internal at step 4: final length 10, each child's block
    # [8, 12) has 2 never-written slots → 6.
    cfg = tiny_config(tmp_path, [(0, 6, 5)], V0, num_blocks=8)
    tot = ParallelSampling(kind="parallel", n=3, fork_after_tokens=2)
    out = run(_with_sampling(cfg, tot), tmp_path)
    assert _col(out, "decode_tokens") == [0, 1, 1, 3, 3]
    assert _col(out, "batch_size") == [1, 1, 1, 3, 3]
    assert _col(out, "copy_blocks") == [0, 0, 0, 0, 0]
    assert _col(out, "blocks_used") == [2, 2, 2, 5, 0]
    assert _col(out, "fork_blocks") == [0, 0, 2, 5, 0]
    assert _col(out, "fork_blocks_independent") == [0, 0, 6, 9, 0]
    assert _col(out, "internal_frag_slots") == [0, 0, 0, 6, 0]
    a = _req(out, 0)
    assert a["finish_s"] == pytest.approx(64 * MS)
    assert (a["generated_tokens"], a["num_seqs"]) == (11, 3)


def test_group_is_swapped_out_and_back_in_with_its_sharing(tmp_path: Path) -> None:
    # 5 blocks of 4, 5 CPU blocks. S = (3, 7) single, then G = (6, 6) with n = 2 (the newest).
    # A decode needs one free block per sequence, even inside its own partial block (vLLM 0.6
    # BlockSpaceManagerV2.can_append_slots); a swap-out needs the distinct full blocks + one
    # block per sequence on the CPU (can_swap_out), a swap-in as many on the GPU (can_swap_in).
    # 1: prefill 9 → 19 ms: S 1 block, G 2; G forks. 2: S in place (2 free ≥ 1), G copies its
    #    shared partial block (2 free ≥ 2 sequences; 4 blocks used) → 13 ms + copy.
    # 3: S takes the last block; G needs 2 free, 0: G (last) is swapped out as one group:
    #    3 distinct blocks (the shared one once; CPU check 1 full + 2). S alone → 11 ms + 3 swaps.
    # 4: S in place; G back in (3 blocks, trailing blocks partial: 3 needed, 3 free) and both
    #    decode → 13 ms + 3 swaps; every block is used, G's trailing blocks are now full.
    # 5: S finds 0 free: G (newest) swapped out again (CPU check 3 full + 2 = 5) → 11 ms + 3.
    # 6, 7: S alone (G needs 3 + 2 new, 3 then 2 free) → 11 ms each; S done at 92.62 ms.
    # 8: G back in (3 blocks, the first still shared) + 2 new → 12 ms + 3 swaps; 0 free.
    # 9, 10: G finds 0 free for its 2 sequences: it swaps itself out (5 blocks; a plan with
    #    nobody left to run is scheduled again at the same time, its swap-out unrecorded) and
    #    straight back in (5 blocks, partial trailing blocks: 5 needed) → 12 ms + 5 swaps each.
    cfg = tiny_config(tmp_path, [(0, 3, 7), (0, 6, 6)], V0, num_blocks=5)
    kv = cfg.kv_cache.model_copy(update={"swap_space_gib": 0.01})
    cfg = cfg.model_copy(update={"kv_cache": kv})
    workload = _workload([(0, 3, 7), (0, 6, 6)]).with_sampling(np.array([1, 2]), 0, False)
    out = _run_workload(cfg, workload, tmp_path)
    assert _col(out, "batch_size") == [2, 3, 1, 3, 1, 1, 1, 2, 2, 2]
    assert _col(out, "swap_out_blocks") == [0, 0, 3, 0, 3, 0, 0, 0, 0, 0]
    assert _col(out, "swap_in_blocks") == [0, 0, 0, 3, 0, 0, 0, 3, 5, 5]
    assert _col(out, "cpu_blocks_used") == [0, 0, 3, 0, 3, 3, 3, 0, 0, 0]
    assert _col(out, "fork_blocks") == [2, 3, 0, 3, 0, 0, 0, 5, 5, 0]
    assert _col(out, "fork_blocks_independent") == [4, 4, 0, 4, 0, 0, 0, 6, 6, 0]
    s, g = _req(out, 0), _req(out, 1)
    assert s["finish_s"] == pytest.approx((19 + 13 + 11 + 13 + 11 * 3) * MS + COPY_S + 9 * SWAP_S)
    assert g["finish_s"] == pytest.approx((19 + 13 + 11 + 13 + 11 * 3 + 12 * 3) * MS + COPY_S
                                          + 22 * SWAP_S)  # fmt: skip
    assert (g["swaps"], g["preemptions"], g["generated_tokens"]) == (4, 4, 12)
    assert g["swapped_bytes"] == (3 + 3 + 5 + 5) * 2 * 2 * 2**20
    assert (s["preemptions"], s["recomputed_tokens"]) == (0, 0)


def test_forced_recompute_still_swaps_a_forked_group(tmp_path: Path) -> None:
    # vLLM 0.6 cannot recompute a multi-sequence group: the same run as above, forced mode.
    cfg = tiny_config(tmp_path, [(0, 3, 7), (0, 6, 6)], V0, num_blocks=5,
                      preemption={"mode": "recompute"})  # fmt: skip
    kv = cfg.kv_cache.model_copy(update={"swap_space_gib": 0.01})
    cfg = cfg.model_copy(update={"kv_cache": kv})
    workload = _workload([(0, 3, 7), (0, 6, 6)]).with_sampling(np.array([1, 2]), 0, False)
    g = _req(_run_workload(cfg, workload, tmp_path), 1)
    assert (g["swaps"], g["recomputed_tokens"]) == (4, 0)  # 4 swaps, as above


def test_beam_search_is_deterministic_and_shares_blocks(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, [(0, 5, 8), (0.001, 7, 6)], V0, num_blocks=16)
    cfg = _with_sampling(cfg, BeamSampling(kind="beam", width=3))
    out = run(cfg, tmp_path)
    again = run(cfg, tmp_path)
    assert out.frames.steps.equals(again.frames.steps)
    req = out.frames.requests
    assert list(req.generated_tokens) == [24, 18]
    assert list(req.num_seqs) == [3, 3]
    steps = out.frames.steps
    forked = steps[steps.fork_blocks_independent > 0]
    assert (forked.fork_blocks < forked.fork_blocks_independent).all()
    assert steps.copy_blocks.sum() > 0
    # steps 1, 2 prefill the two prompts; in step 3 each request's 3 beams share their
    # prompt's partial block: 2 copies each
    assert _col(out, "prefill_tokens")[:3] == [5, 7, 0]
    assert int(steps.copy_blocks.iloc[2]) == 4
    assert 0 < out.summary["mean_fork_saving"] < 1


def test_sampling_needs_vllm_v0(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, [(0, 4, 2)], {"kind": "vllm_v1"}, num_blocks=8)
    cfg = _with_sampling(cfg, ParallelSampling(kind="parallel", n=2))
    with pytest.raises(ValueError, match=r"vLLM 0\.11 fans n out"):
        check_sampling_scheduler(cfg.workload, cfg.scheduler.kind)
    check_sampling_scheduler(cfg.workload, "vllm_v0")
    with pytest.raises(InputError, match="separate requests"):
        run(cfg, tmp_path)


def test_workload_sampling_columns_validate() -> None:
    base = _workload([(0, 4, 2), (1, 4, 2)])
    w = base.with_sampling(np.array([2, 1]), 0, np.array([True, False]))
    assert list(w.to_frame().columns[-3:]) == ["n_seqs", "fork_after", "beam"]
    assert w.take(1).n_seqs.tolist() == [2]
    with pytest.raises(ValueError, match="n_seqs"):
        base.with_sampling(0, 0, False)
    with pytest.raises(ValueError, match="0 for beam search"):
        base.with_sampling(2, 1, True)


def test_group_helpers() -> None:
    group = ForkGroup(3, 2, False)
    assert [group.generated_tokens(k) for k in (1, 2, 3, 5)] == [1, 2, 5, 11]
    with pytest.raises(ValueError):
        ForkGroup(2, 1, True)
    full = [SequenceTable(4, [0, 1], 8), SequenceTable(4, [0, 2], 8)]
    shared = [SequenceTable(4, [0, 5], 6)] * 3
    assert (decode_blocks_needed(full, 4), decode_blocks_needed(shared, 4)) == (2, 2)


def _workload(reqs: list[tuple[float, int, int]]) -> Workload:
    return Workload.from_arrays(
        [a for a, _, _ in reqs], [p for _, p, _ in reqs], [o for _, _, o in reqs], source="test"
    )


def _run_workload(cfg: SimConfig, workload: Workload, tmp_path: Path) -> RunOutput:
    engine, sizing = build_engine(cfg, tmp_path, check_invariants=True, workload=workload)
    engine.run()
    frames = engine.recorder.frames()
    summary = summarize(frames, cfg.slo, sizing.num_blocks)
    return RunOutput(cfg, sizing, frames, summary, 0.0)


fork_requests = st.lists(
    st.tuples(
        st.integers(0, 30).map(lambda ms: ms / 1000),  # arrival
        st.integers(1, 9),  # prompt
        st.integers(1, 6),  # output
        st.integers(1, 3),  # n
        st.integers(0, 3),  # fork_after
        st.booleans(),  # beam
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=fork_requests, blocks=st.integers(4, 12),
       mode=st.sampled_from(["auto", "swap", "recompute"]), max_seqs=st.sampled_from([2, 4, 256]),
       swap_gib=st.sampled_from([0.004, 0.01]), seed=st.integers(0, 3))  # fmt: skip
def test_fork_workloads_conserve_blocks(
    reqs: list[tuple[float, int, int, int, int, bool]],
    blocks: int,
    mode: str,
    max_seqs: int,
    swap_gib: float,
    seed: int,
) -> None:
    # Swap space of 0.004 GiB = 2 blocks: groups may be aborted (swap_space_exhausted); a group
    # may outgrow the pool (kv_never_fits) or max_num_seqs (rejected); the rest finish.
    reqs = sorted(reqs)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        sched = {**V0, "max_num_seqs": max_seqs}
        cfg = tiny_config(tmp_path, [r[:3] for r in reqs], sched, num_blocks=blocks,
                          preemption={"mode": mode}, seed=seed)  # fmt: skip
        kv = cfg.kv_cache.model_copy(update={"swap_space_gib": swap_gib})
        cfg = cfg.model_copy(update={"kv_cache": kv})
        beam = np.array([r[5] for r in reqs])
        workload = _workload([r[:3] for r in reqs]).with_sampling(
            np.array([r[3] for r in reqs]), np.where(beam, 0, [r[4] for r in reqs]), beam
        )
        engine, _ = build_engine(cfg, tmp_path, check_invariants=True, workload=workload)
        engine.run()
    kv = engine.scheduler.kv
    assert kv.gpu.free_blocks == kv.gpu.num_blocks
    assert kv.swap.cpu_blocks_used == 0
    assert (kv.sums.written_tokens, kv.sums.internal_slots, kv.sums.fork_dup_tokens) == (0, 0, 0)
    req = engine.recorder.frames().requests
    assert sorted(req.req_id) == list(range(len(reqs)))
    for row in req.itertuples():
        _, _, output, n, fork_after, is_beam = reqs[row.req_id]
        if row.status != "finished":
            assert row.reason in ("swap_space_exhausted", "kv_never_fits", "n_exceeds_max_num_seqs")
            continue
        after = 0 if is_beam else fork_after
        expected = output if n < 2 or after >= output else after + n * (output - after)
        assert row.generated_tokens == expected


def test_synthetic_config_sets_sampling_columns(tmp_path: Path) -> None:
    cfg = SimConfig.model_validate({
        "workload": {
            "kind": "synthetic", "num_requests": 3, "arrival": {"kind": "constant", "rate": 1.0},
            "prompt_tokens": {"kind": "fixed", "value": 8},
            "output_tokens": {"kind": "fixed", "value": 4},
            "sampling": {"kind": "parallel", "n": 4, "fork_after_tokens": 2},
        },
        "model": "llama-2-7b", "gpu": "a100-80gb", "scheduler": {"kind": "vllm_v0"},
    })  # fmt: skip
    w = build_workload(cfg.workload, np.random.default_rng(0), tmp_path)
    assert w.n_seqs.tolist() == [4, 4, 4] and w.fork_after.tolist() == [2, 2, 2]
    assert not w.beam.any()
    beam = cfg.workload.model_copy(update={"sampling": BeamSampling(kind="beam", width=2)})
    w = build_workload(beam, np.random.default_rng(0), tmp_path)
    assert w.n_seqs.tolist() == [2, 2, 2] and w.fork_after.tolist() == [0, 0, 0]
    assert w.beam.all()


def test_a_beam_step_costs_the_tails_not_the_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beam search with a long prompt and small blocks (issue: 14k-token prompts, block_size 4
    ran at ~5 steps/s): re-drawing the beams takes references only to the beams' tails, so the
    block references a run takes stay near one fork of the prompt per beam, not one per step."""
    from simkv.kv.allocator import BlockAllocator

    cfg = SimConfig.model_validate({
        "name": "beam-long", "seed": 0,
        "workload": {
            "kind": "synthetic", "num_requests": 2, "arrival": {"kind": "poisson", "rate": 1.0},
            "prompt_tokens": {"kind": "fixed", "value": 14000},
            "output_tokens": {"kind": "fixed", "value": 40},
            "sampling": {"kind": "beam", "width": 4},
        },
        "model": {"preset": "llama-2-7b", "max_model_len": 16384},
        "gpu": "a100-80gb",
        "kv_cache": {"block_size": 4},
        "scheduler": {"kind": "vllm_v0"},
    })  # fmt: skip
    calls = [0]
    incref = BlockAllocator.incref

    def counting(self: BlockAllocator, block_id: int) -> None:
        calls[0] += 1
        incref(self, block_id)

    monkeypatch.setattr(BlockAllocator, "incref", counting)
    with tempfile.TemporaryDirectory() as tmp:
        engine, _ = build_engine(cfg, Path(tmp))
        engine.run()
    prompt_blocks = 14000 // 4
    assert engine.recorder.num_done == 2
    assert calls[0] < 2 * 4 * prompt_blocks  # was ~40 x (width - 1) x prompt_blocks per request
