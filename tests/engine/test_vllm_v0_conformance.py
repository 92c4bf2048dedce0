"""vLLM 0.6.3 conformance of ``vllm_v0``: hand-computed runs through ``simkv run``.

Each scenario follows vLLM 0.6.3's source (the default ``BlockSpaceManagerV2``, selected by
``EngineArgs.use_v2_block_manager = True``), named in its docstring; the derivation is in the
comments. Cost as in ``tests/engine/helpers.py``: a step of n tokens takes 10 + n ms.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.helpers import cli_run, tiny_data

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
