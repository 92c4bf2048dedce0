"""vLLM 0.6.3 conformance of ``vllm_v0``: hand-computed runs through ``simkv run``.

Each scenario follows vLLM 0.6.3's source (the default ``BlockSpaceManagerV2``, selected by
``EngineArgs.use_v2_block_manager = True``), named in its docstring; the derivation is in the
comments. Cost as in ``tests/engine/helpers.py``: a step of n tokens takes 10 + n ms.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simkv.config.sim import SimConfig
from tests.engine.helpers import build_engine, cli_run, tiny_data

MS = 1e-3


def _steps(steps) -> list[tuple[int, int, int, int]]:  # (prefill, decode, batch, preempted)
    cols = (steps.prefill_tokens, steps.decode_tokens, steps.batch_size, steps.preempted)
    return [tuple(int(v) for v in row) for row in zip(*cols, strict=True)]


def test_a_decode_needs_a_free_block_even_inside_its_own_block(tmp_path: Path) -> None:
    """Rule 6: vLLM 0.6.3 ``core/block_manager_v2.py`` ``BlockSpaceManagerV2.can_append_slots``
    counts one touched block per running sequence (``core/block/block_table.py``
    ``BlockTable.get_num_blocks_touched_by_append_slots`` is 1 for one unseen token, whether or
    not the token lands in the sequence's partial block) and asks ``touched <= free``;
    ``core/scheduler.py`` ``Scheduler._schedule_running`` preempts the last running request
    while it fails.

    4 blocks of 4, watermark int(0.01 · 4) = 0; A = B = (prompt 6, output 3) at t = 0.
    1: prefill A 6 + B 6 (2 blocks each, 0 free) → 22 ms, .022; both have 7 tokens, 6 in KV.
    2: A's token 7 fits in its own block, but 1 touched > 0 free → B (newest) preempted by
       recompute (6 tokens; 2 blocks freed); A decodes → 11 ms, .033.
    3: nothing swapped: B re-prefills 7 tokens (2 blocks, 2 free: OK) → 17 ms, .050.
    4: again 0 free → B preempted (7 tokens); A's 3rd token → 11 ms, .061, A done (frees 2).
    5: B re-prefills 8 tokens → 18 ms, .079, B's 3rd token: done.
    """
    data = tiny_data(tmp_path, [(0, 6, 3), (0, 6, 3)], {"kind": "vllm_v0"}, num_blocks=4)
    steps, reqs = cli_run(tmp_path, data)
    assert _steps(steps) == [
        (12, 0, 2, 0), (0, 1, 1, 1), (7, 0, 1, 0), (0, 1, 1, 1), (8, 0, 1, 0)
    ]  # fmt: skip
    a, b = reqs.loc[0], reqs.loc[1]
    assert a.finish_s == pytest.approx(61 * MS)
    assert b.finish_s == pytest.approx(79 * MS)
    assert (a.preemptions, b.preemptions, b.recomputed_tokens) == (0, 2, 6 + 7)


SWAP_S = 2 * 32 * 5e-6 + 2 * 2**20 / (32e9 * 0.8)  # one 2 MiB block (Llama-2-7B, 4 tokens)
ONE_CPU_BLOCK_GIB = 2 / 1024


def test_a_swap_out_reserves_the_next_tokens_block_on_the_cpu(tmp_path: Path) -> None:
    """Rule 7: vLLM 0.6.3 ``core/block_manager_v2.py`` ``BlockSpaceManagerV2.can_swap_out``
    (through ``_can_swap``) needs the full blocks (``core/block/naive_block.py``
    ``NaiveBlockAllocator.get_num_full_blocks_touched``) plus the blocks the unseen token
    touches (``BlockTable.get_num_blocks_touched_by_append_slots``: 1) free on the CPU; when it
    fails, ``core/scheduler.py`` ``Scheduler._swap_out`` raises (simkv aborts the request:
    ``swap_space_exhausted``).

    3 GPU blocks of 4, 1 CPU block, watermark 0, mode swap. A = (4, 6), B = (3, 4) at t = 0.
    1: prefill 7 → 17 ms, .017. A 1 full block, B 1 block with 3 tokens; 1 free.
    2: A takes the free block for its token 5; B finds 0 free → swapped out: its block is
       partial, 0 full + 1 = 1 CPU block → OK. A alone → 11 ms + 1 swap.
    3: B back in (1 block, its token lands in it: 1 needed, 1 free) → A + B: 12 ms + 1 swap.
    4: 0 free: B (newest) must go; now its block is full: 1 + 1 = 2 CPU blocks > the pool's 1
       → aborted (counted as the step's preemption; its GPU block freed). A alone → 11 ms.
    5, 6: A → 11 ms each, A done.
    """
    data = tiny_data(
        tmp_path, [(0, 4, 6), (0, 3, 4)], {"kind": "vllm_v0", "watermark": 0.0},
        num_blocks=3, max_model_len=12, preemption={"mode": "swap"},
    )  # fmt: skip
    data["kv_cache"]["swap_space_gib"] = ONE_CPU_BLOCK_GIB
    steps, reqs = cli_run(tmp_path, data)
    assert _steps(steps) == [
        (7, 0, 2, 0), (0, 1, 1, 1), (0, 2, 2, 0), (0, 1, 1, 1), (0, 1, 1, 0), (0, 1, 1, 0)
    ]  # fmt: skip
    assert list(steps.swap_out_blocks) == [0, 1, 0, 0, 0, 0]
    assert list(steps.swap_in_blocks) == [0, 0, 1, 0, 0, 0]
    a, b = reqs.loc[0], reqs.loc[1]
    assert a.finish_s == pytest.approx((17 + 11 + 12 + 11 * 3) * MS + 2 * SWAP_S)
    assert (b.status, b.reason, b.swaps, b.preemptions) == (
        "aborted", "swap_space_exhausted", 1, 2
    )  # fmt: skip
    assert b.finish_s == pytest.approx((17 + 11 + 12) * MS + 2 * SWAP_S)
    assert b.generated_tokens == 2


def test_a_full_trailing_block_needs_one_more_cpu_block(tmp_path: Path) -> None:
    """Rule 7, the direct case (``BlockSpaceManagerV2.can_swap_out``): B = (4, 4) holds one
    full block at its first swap-out, which needs 1 + 1 CPU blocks: with 1 it is aborted at
    step 2 (t = 18 ms, after the 8-token prefill), with 2 it is swapped out and back in."""
    requests = [(0, 4, 6), (0, 4, 4)]
    outcomes = []
    for cpu_blocks in (1, 2):
        run_dir = tmp_path / str(cpu_blocks)
        run_dir.mkdir()
        data = tiny_data(
            run_dir, requests, {"kind": "vllm_v0", "watermark": 0.0},
            num_blocks=3, max_model_len=12, preemption={"mode": "swap"},
        )  # fmt: skip
        data["kv_cache"]["swap_space_gib"] = cpu_blocks * ONE_CPU_BLOCK_GIB
        _, reqs = cli_run(run_dir, data)
        outcomes.append((reqs.loc[1].status, reqs.loc[1].swaps))
    assert outcomes == [("aborted", 0), ("finished", 1)]


def _block_tables(tmp_path: Path, data: dict) -> list[dict[int, list[int]]]:
    """The running requests' block ids after each step's scheduling in ``data``'s run (block
    ids are in no output file, so the scheduler is watched)."""
    cfg = SimConfig.model_validate(data)
    engine, _ = build_engine(cfg, tmp_path, check_invariants=True)
    sched, seen = engine.scheduler, []
    schedule = sched.schedule

    def watched(now: float):
        plan = schedule(now)
        if not plan.empty:
            seen.append({s.req_id: list(s.table.block_ids) for s in sched.running})
        return plan

    sched.schedule = watched
    engine.run()
    return seen


@pytest.mark.parametrize("reuse", [None, "fifo"])
def test_freed_blocks_are_reused_last_in_first_out(tmp_path: Path, reuse: str | None) -> None:
    """Rule 8: vLLM 0.6.3 ``core/block/naive_block.py`` ``NaiveBlockAllocator`` frees a block
    id with ``appendleft`` (``_free_block_id``) and allocates with ``popleft``
    (``_allocate_block_id``); ``core/block/block_table.py`` ``BlockTable.free`` frees a table's
    blocks first to last. ``kv_cache.reuse`` is ``lifo`` under ``vllm_v0`` unless set.

    Rule 6's run (4 blocks of 4, A = B = (6, 3)); the free deque starts 0, 1, 2, 3.
    1: A [0, 1], B [2, 3]. 2: B preempted: 2, 3 freed → deque 3, 2. 3: B [3, 2].
    4: B preempted: 3, 2 freed → 2, 3; A finishes: 0, 1 freed → 1, 0, 2, 3. 5: B [1, 0].
    Under ``fifo`` (vLLM 0.11's order: a table freed last block first, to the tail) step 4
    leaves 2, 3, 1, 0 and B gets [2, 3].
    """
    data = tiny_data(tmp_path, [(0, 6, 3), (0, 6, 3)], {"kind": "vllm_v0"}, num_blocks=4)
    if reuse is not None:
        data["kv_cache"]["reuse"] = reuse
    last = [1, 0] if reuse is None else [2, 3]
    assert _block_tables(tmp_path, data) == [
        {0: [0, 1], 1: [2, 3]}, {0: [0, 1]}, {0: [0, 1], 1: [3, 2]}, {0: [0, 1]}, {1: last},
    ]  # fmt: skip
    cli_run(tmp_path, data)  # the resolved config says which order ran
    resolved = yaml.safe_load((tmp_path / "out" / "config.resolved.yaml").read_text())
    assert resolved["kv_cache"]["reuse"] == (reuse or "lifo")
    v1 = SimConfig.model_validate({**data, "scheduler": {"kind": "vllm_v1"}})
    assert v1.kv_cache.reuse == (reuse or "fifo")
