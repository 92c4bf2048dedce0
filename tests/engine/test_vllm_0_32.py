"""The rules where vLLM 0.32 differs from 0.11, each on a hand-computed scenario through
``simkv run`` (``vllm_version: "0.32"``), each found by replaying random scenarios through a
real vLLM 0.32.0 (``tools/vllm_reference/``, ``docs/conformance.md``).

Cost: a step of n tokens takes 10 + n ms (a ``table`` cost model).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from simkv.config.sim import SimConfig
from simkv.engine.queues import pick_victim
from tests.engine.helpers import cli_run, tiny_data, tiny_document

V032 = {"kind": "vllm_v1", "vllm_version": "0.32"}


def _steps(steps: Any) -> list[tuple[int, int, int, int]]:
    cols = (steps.prefill_tokens, steps.decode_tokens, steps.batch_size, steps.preempted)
    return [tuple(map(int, row)) for row in zip(*cols, strict=True)]


# -- the long-prefill threshold is off for a lone request ------------------------------------
@pytest.mark.parametrize("version", ["0.11", "0.32"])
def test_the_long_prefill_threshold_is_off_while_one_request_runs_or_waits(
    tmp_path: Path, version: str
) -> None:
    """vLLM 0.32 ``v1/core/sched/scheduler.py`` ``Scheduler.schedule``: the threshold applies
    only when more than one request runs or waits (``get_request_counts``) as the step starts
    ("nobody to starve"); 0.11 always applies it.

    Threshold 16, budget 64. A = (8, 2), B = (60, 2) at 0. 1: A 8 + B 16. 2: A decodes (and
    finishes) + B 16. 3: B is alone: 0.32 schedules its 28 left, 0.11 16 then 12. Then B's
    decode.
    """
    sched = {"kind": "vllm_v1", "vllm_version": version, "max_num_batched_tokens": 64,
             "long_prefill_token_threshold": 16}  # fmt: skip
    data = tiny_data(tmp_path, [(0, 8, 2), (0, 60, 2)], sched, num_blocks=40, max_model_len=64)
    steps, _ = cli_run(tmp_path, data)
    alone = [(28, 0, 1, 0)] if version == "0.32" else [(16, 0, 1, 0), (12, 0, 1, 0)]
    assert _steps(steps) == [(24, 0, 2, 0), (16, 1, 2, 0), *alone, (0, 1, 1, 0)]


# -- freed blocks without cached content are reused first ------------------------------------
@pytest.mark.parametrize("version", ["0.11", "0.32"])
def test_freed_blocks_without_cached_content_are_reused_before_cached_ones(
    tmp_path: Path, version: str
) -> None:
    """vLLM 0.32 ``v1/core/block_pool.py`` ``BlockPool.free_blocks``: a freed block with no
    hash goes to the head of the free queue (``prepend_n``), a cached one to the tail; 0.11
    appends every freed block to the tail (``kv_cache.reuse``: ``split`` against ``fifo``).

    5 usable blocks of 4 (1–5; 0 is the null block). At 0: A = 9 tokens (blocks 1, 2 full and
    cached, 3 partial) and C = 2 tokens (block 4), one output token each: both finish in the
    first step, A's blocks freed tail first, then C's. Free queue under fifo: 5, 3, 2, 1, 4;
    under split: 4, 3, 5, 2, 1. At 100 ms D (13 unrelated tokens) takes 4 blocks: fifo takes
    5, 3, 2, 1 and evicts both of A's cached blocks; split takes 4, 3, 5, 2 and keeps block 1.
    At 200 ms E, A's prompt again, hits A's first block (4 tokens) under split, nothing under
    fifo.
    """
    rows = [(0, 9, 7), (0, 2, 8), (100, 13, 9), (200, 9, 7)]  # (ms, tokens, hash id)
    trace = tmp_path / "trace.jsonl"
    lines = [{"timestamp": t, "input_length": n, "output_length": 1, "hash_ids": [h]}
             for t, n, h in rows]  # fmt: skip
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    workload = {"kind": "trace", "path": str(trace), "format": "mooncake"}
    sched = {"kind": "vllm_v1", "vllm_version": version}
    data = tiny_document(tmp_path, "split", workload, sched, num_blocks=6, block_size=4,
                         max_model_len=16)  # fmt: skip
    _, requests = cli_run(tmp_path, data)
    resolved = yaml.safe_load((tmp_path / "out" / "config.resolved.yaml").read_text())
    assert resolved["kv_cache"]["reuse"] == ("split" if version == "0.32" else "fifo")
    assert list(requests.prefix_hit_tokens) == [0, 0, 0, 4 if version == "0.32" else 0]


# -- the priority victim among equal arrival times ---------------------------------------------
def test_the_priority_victim_among_equal_arrivals_is_the_later_request() -> None:
    """vLLM ``Scheduler.schedule`` preempts ``max(running, key=(priority, arrival_time))``;
    its arrival times differ in the order requests were added, which simkv's request ids
    follow when arrival times are equal. So among equals the later request is the victim,
    even when it was admitted first (a preempted earlier request re-admitted after it)."""
    later = SimpleNamespace(priority=1, arrival_s=0.0, req_id=5)
    earlier = SimpleNamespace(priority=1, arrival_s=0.0, req_id=2)
    other = SimpleNamespace(priority=0, arrival_s=3.0, req_id=9)
    admission_order = [later, other, earlier]
    assert pick_victim(admission_order, "lowest_priority") is later  # type: ignore[arg-type]


# -- the release's defaults ----------------------------------------------------------------------
def _resolved(tmp_path: Path, scheduler: dict[str, Any], **kv: Any) -> SimConfig:
    data = tiny_data(tmp_path, [(0, 8, 2)], scheduler, num_blocks=40, max_model_len=64)
    data["kv_cache"].update(kv)
    return SimConfig.model_validate(data)


def test_vllm_0_32_reserves_the_full_prompt_and_splits_the_free_queue_by_default(
    tmp_path: Path,
) -> None:
    """vLLM 0.32 ``config/scheduler.py``: ``scheduler_reserve_full_isl = True``; 0.11 has no
    such check. The resolved config states both, and what a config sets wins."""
    new, old = _resolved(tmp_path, V032), _resolved(tmp_path, {"kind": "vllm_v1"})
    assert new.scheduler.reserve_full_prompt is True  # type: ignore[union-attr]
    assert new.kv_cache.reuse == "split"
    assert old.scheduler.reserve_full_prompt is False  # type: ignore[union-attr]
    assert old.kv_cache.reuse == "fifo"
    mine = _resolved(tmp_path, {**V032, "reserve_full_prompt": False}, reuse="fifo")
    assert mine.scheduler.reserve_full_prompt is False  # type: ignore[union-attr]
    assert mine.kv_cache.reuse == "fifo"


# -- async scheduling --------------------------------------------------------------------------
@pytest.mark.parametrize("async_scheduling", [False, True])
def test_under_async_scheduling_a_finished_request_holds_its_slot_one_step_longer(
    tmp_path: Path, async_scheduling: bool
) -> None:
    """vLLM 0.32 ``v1/engine/core.py`` ``EngineCore.step_with_batch_queue`` (two batches in
    flight) schedules step n + 1 before step n's output is processed
    (``v1/core/sched/async_scheduler.py`` ``AsyncScheduler``): a request that samples its last
    token in step n still holds its running slot (and blocks) in step n + 1's scheduling, and
    is not scheduled (``Scheduler.schedule`` skips a request whose in-flight token reaches
    ``max_tokens``); it is freed after.

    ``max_num_seqs`` 2; A = (4, 2), C = (4, 5), B = (4, 1) at 0, in that order. 1: A 4 + C 4.
    2: both decode; A samples its last token. 3: sync: B 4 + C; async: A's slot is still
    taken, only C decodes, then A leaves. 4: async: B 4 + C. Then C decodes to its end.
    """
    sched = {**V032, "max_num_seqs": 2, "async_scheduling": async_scheduling}
    data = tiny_data(tmp_path, [(0, 4, 2), (0, 4, 5), (0, 4, 1)], sched, num_blocks=40)
    steps, requests = cli_run(tmp_path, data)
    if async_scheduling:
        rows = [(8, 0, 2, 0), (0, 2, 2, 0), (0, 1, 1, 0), (4, 1, 2, 0), (0, 1, 1, 0)]
    else:
        rows = [(8, 0, 2, 0), (0, 2, 2, 0), (4, 1, 2, 0), (0, 1, 1, 0), (0, 1, 1, 0)]
    assert _steps(steps) == rows
    assert list(requests.output_tokens) == [2, 5, 1]
    assert (requests.status == "finished").all()


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_a_parked_request_can_be_the_priority_victim(
    tmp_path: Path, async_scheduling: bool
) -> None:
    """vLLM 0.32 ``Scheduler.schedule`` picks the priority victim among all running requests,
    the one whose last token is still in flight too; preempting it frees its blocks at once
    (it then finishes when its token arrives, never waiting again).

    2 usable blocks of 4, no prefix caching, ``policy: priority``. P = (3, 2) priority 5 at 0,
    Q = (4, 4) priority 0 at 5 ms. 1: P 3 (block 1). 2: P decodes into block 1 and samples its
    last token; Q 4 (block 2). 3: Q's 5th token needs a block: without async, P has left and
    freed it; with async, P still holds it, so P (priority 5, ahead of Q in the running list)
    is the victim. Then Q decodes to its end.
    """
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens,priority\n0,3,2,5\n0.005,4,4,0\n")
    columns = {"arrival_s": "arrival_s", "priority": "priority"}
    workload = {"kind": "trace", "path": str(trace), "format": "generic", "columns": columns}
    sched = {**V032, "policy": "priority", "async_scheduling": async_scheduling}
    data = tiny_document(tmp_path, "parked", workload, sched, num_blocks=3, block_size=4,
                         max_model_len=8)  # fmt: skip
    data["kv_cache"]["prefix_caching"] = "none"
    steps, requests = cli_run(tmp_path, data)
    third = (0, 1, 1, 1) if async_scheduling else (0, 1, 1, 0)
    assert _steps(steps) == [(3, 0, 1, 0), (4, 1, 2, 0), third, (0, 1, 1, 0), (0, 1, 1, 0)]
    assert (requests.status == "finished").all()
    assert list(requests.output_tokens) == [2, 4]


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_under_async_scheduling_a_block_is_cached_once_its_last_token_is_processed(
    tmp_path: Path, async_scheduling: bool
) -> None:
    """vLLM 0.32 ``v1/core/kv_cache_manager.py`` ``KVCacheManager.allocate_slots`` caches the
    blocks full of known tokens (``min(computed + new, num_tokens)``) and
    ``Scheduler.update_from_output`` those full of computed ones, for running requests only; a
    token sampled in step n is known after step n + 1's ``schedule()``. So with async
    scheduling a request preempted as it needs its next block has not cached the block it
    just filled, and recomputes it when it returns.

    4 usable blocks of 4, ``max_num_seqs`` 2. A = (8, 4), B = (2, 8) at 0. 1: A 8 (blocks 1,
    2) + B 2 (block 3). 2, 3: both decode; A takes block 4; B's 4th token fills block 3 in
    step 3. 4: B needs a block, none is free: B preempts itself; A samples its last token. 5:
    without async, block 3 was cached (B hits 4 tokens and computes 1); with async it was not
    (and A's blocks come back only after the first schedule): B recomputes all 5.
    """
    sched = {**V032, "max_num_seqs": 2, "max_num_batched_tokens": 16,
             "async_scheduling": async_scheduling}  # fmt: skip
    data = tiny_data(tmp_path, [(0, 8, 4), (0, 2, 8)], sched, num_blocks=5, max_model_len=12)
    steps, requests = cli_run(tmp_path, data)
    back = (5, 0, 1, 0) if async_scheduling else (0, 1, 1, 0)
    head = [(10, 0, 2, 0), (0, 2, 2, 0), (0, 2, 2, 0), (0, 1, 1, 1), back]
    assert _steps(steps) == [*head, *[(0, 1, 1, 0)] * 4]
    assert requests.loc[1, "cache_hit_tokens"] == (0 if async_scheduling else 4)
