"""Prompt content from per-block hash ids (Mooncake and Qwen-Bailian traces).

Both publishers hash each fixed-size block of a prompt's tokens (chained: a block's id names the
whole prefix up to it) and remap the hashes to integers. One id becomes one segment of
``block_tokens`` tokens (:mod:`simkv.workload.content`), which makes prefix-cache hits exact at
any simulated block size. Mooncake: 512 tokens per id, ``ceil(input_length / 512)`` ids (the
last block partial). Qwen-Bailian: 16 tokens per id; a row may also list only the
``floor(input_length / 16)`` full blocks, and its remaining tokens then form a segment no other
request shares.
"""

from __future__ import annotations

import numpy as np

from simkv.tables import Table
from simkv.workload.content import PromptContent

#: Tokens covered by one Mooncake hash id (kvcache-ai/Mooncake, FAST25-release/README.md).
MOONCAKE_BLOCK_TOKENS = 512
#: Tokens covered by one Qwen-Bailian hash id (alibaba-edu/qwen-bailian-usagetraces-anon README).
BAILIAN_BLOCK_TOKENS = 16


def hash_id_lists(table: Table) -> list[np.ndarray]:
    """Column ``hash_ids`` in file order: per row, a list of integer ids ≥ 0 (int64)."""
    out: list[np.ndarray] = []
    for row, value in enumerate(table.column("hash_ids").tolist()):
        if not isinstance(value, list) or not all(type(v) is int for v in value):
            raise table.fail(row, "hash_ids", "expected a list of integers")
        if value and not 0 <= min(value) <= max(value) < 2**63:
            raise table.fail(row, "hash_ids", f"hash ids must be in [0, 2^63), got {value}")
        out.append(np.asarray(value, dtype=np.int64))
    return out


def check_hash_counts(
    table: Table, hash_ids: list[np.ndarray], prompt: np.ndarray, block_tokens: int, *, full: bool
) -> None:
    """Each row needs one id per ``block_tokens`` block of its prompt, the last one partial
    (``ceil``), or, with ``full``, possibly only one per full block (``floor``)."""
    counts = np.array([len(ids) for ids in hash_ids], dtype=np.int64)
    needed = -(-prompt // block_tokens)
    bad = (counts != needed) & ~(full & (counts == prompt // block_tokens))
    if bad.any():
        row = int(np.argmax(bad))
        also = f" or floor(...) = {prompt[row] // block_tokens}" if full else ""
        message = (
            f"{counts[row]} hash ids for input_length {prompt[row]}: expected "
            f"ceil({prompt[row]} / {block_tokens}) = {needed[row]}{also}"
        )
        raise table.fail(row, "hash_ids", message)


def hash_id_content(
    hash_ids: list[np.ndarray], prompt: np.ndarray, block_tokens: int
) -> PromptContent:
    """Segments ``(hash_id, block_tokens)`` per request; a partial last block holds the
    remainder, and tokens beyond the listed blocks form a segment of their own. Request ``i``'s
    output id is ``max hash id + 1 + i``; its own tail segment (if any) ``max hash id + 1 + n
    + i`` for ``n`` requests."""
    n = len(hash_ids)
    counts = np.array([len(ids) for ids in hash_ids], dtype=np.int64)
    seg_ids = np.concatenate(hash_ids) if n else np.zeros(0, np.int64)
    top = int(seg_ids.max()) + 1 if len(seg_ids) else 0
    tail = prompt - block_tokens * counts  # > 0: tokens after the listed (full) blocks
    has_tail = tail > 0
    if has_tail.any():  # Bailian rows listing only their full blocks: one more segment each
        ends = np.cumsum(counts)[has_tail]
        seg_ids = np.insert(seg_ids, ends, top + n + np.flatnonzero(has_tail))
        counts = counts + has_tail
    offsets = np.zeros(n + 1, np.int64)
    offsets[1:] = np.cumsum(counts)
    seg_lens = np.full(len(seg_ids), block_tokens, np.int64)
    seg_lens[offsets[1:] - 1] = np.where(has_tail, tail, prompt - block_tokens * (counts - 1))
    output_ids = top + np.arange(n, dtype=np.int64)
    return PromptContent(seg_ids, seg_lens, offsets, output_ids)
