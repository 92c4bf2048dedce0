"""Block identities of a whole workload at once: :func:`~simkv.workload.content.block_keys`
vectorised over every request.

:func:`~simkv.workload.content.block_keys` hashes one block after another in Python, fine for
an engine that meets blocks as it computes them, too slow for ten million blocks at once. This
module gives every full block of every prompt an integer id such that two blocks have the same
id exactly when ``block_keys`` gives them the same key (tested on random contents in
``tests/workload/test_block_ids.py``); the ids differ from the keys' values, only equality is
kept.

Why it is exact: ``block_keys`` key ``j`` hashes the pieces ``(segment_id, start, end)`` of
every block up to ``j``, so two prompts share it exactly when their first ``T = (j + 1) ·
block_size`` tokens are the same segments: the same ids in the same order, the same lengths
for the segments that end before ``T``, and the same id for the segment holding token ``T - 1``
(whose length beyond ``T`` does not matter). So block ``j``'s identity is the pair
(*open node* of the segment holding token ``T - 1``, ``T``), where the open node of segment
``k`` names (the segments before ``k`` with their lengths, the id of ``k``). Open nodes are
interned exactly, one segment depth at a time over all requests (a sort per depth), so no hash
collision can occur here.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simkv.config.limits import MAX_TOKENS
from simkv.workload.content import PromptContent

_T_BITS = (MAX_TOKENS).bit_length()  # T ≤ MAX_TOKENS fits below the open node in one int64


class BlockIds(NamedTuple):
    """Ids of the first ``counts[i]`` full blocks of each request ``i``, flat in request
    order: request ``i``'s block ``j`` is ``ids[starts[i] + j]`` (int64)."""

    ids: np.ndarray
    starts: np.ndarray
    counts: np.ndarray


def _intern_pairs(a: np.ndarray, b: np.ndarray, first_id: int) -> np.ndarray:
    """Ids ``first_id, first_id + 1, …`` for the distinct pairs ``(a[i], b[i])``, equal ids for
    equal pairs (ids numbered in sorted pair order)."""
    if len(a) == 0:
        return np.zeros(0, np.int64)
    order = np.lexsort((b, a))
    sa, sb = a[order], b[order]
    new = np.ones(len(a), bool)
    new[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
    ids = np.empty(len(a), np.int64)
    ids[order] = first_id + np.cumsum(new) - 1
    return ids


def open_nodes(content: PromptContent) -> np.ndarray:
    """Per flat segment, an id naming (every segment before it with its length, its own id);
    equal ids for equal such prefixes across requests."""
    counts = np.diff(content.offsets)
    nodes = np.zeros(len(content.seg_ids), np.int64)
    closed = np.zeros(len(counts), np.int64)  # per request: the closed node before depth k
    next_id = 1
    for depth in range(int(counts.max(initial=0))):
        rows = np.flatnonzero(counts > depth)
        flat = content.offsets[rows] + depth
        opened = _intern_pairs(closed[rows], content.seg_ids[flat], next_id)
        next_id += len(opened)
        nodes[flat] = opened
        closed[rows] = _intern_pairs(opened, content.seg_lens[flat], next_id)
        next_id += len(opened)
    return nodes


def block_ids(content: PromptContent, block_size: int, counts: np.ndarray) -> BlockIds:
    """Ids of the first ``counts[i]`` full blocks of each request's prompt (``counts[i] ·
    block_size`` ≤ its prompt length), equal exactly when ``block_keys`` keys are."""
    counts = np.asarray(counts, np.int64)
    prompt = content.prompt_tokens()
    if np.any(counts < 0) or np.any(counts * block_size > prompt):
        raise ValueError("counts must lie between 0 and each prompt's full blocks")
    starts = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    total = int(counts.sum())
    request = np.repeat(np.arange(len(counts)), counts)
    j = np.arange(total, dtype=np.int64) - starts[request]
    end_tokens = (j + 1) * block_size
    seg_ends = np.cumsum(content.seg_lens, dtype=np.int64)
    first_seg = content.offsets[:-1]
    before = np.where(first_seg > 0, seg_ends[np.maximum(first_seg - 1, 0)], 0)
    holder = np.searchsorted(seg_ends, before[request] + end_tokens, side="left")
    ids = (open_nodes(content)[holder] << _T_BITS) | end_tokens
    return BlockIds(ids, starts, counts)


def with_outputs(content: PromptContent, output_tokens: np.ndarray) -> PromptContent:
    """Each request's whole sequence as content: its prompt segments, then one segment of its
    ``output_tokens`` generated tokens (``output_ids[i]``, as
    :class:`~simkv.workload.content.KeyStream` names them;
    ``output_tokens`` ≥ 1)."""
    outputs = np.asarray(output_tokens, np.int64)
    counts = np.diff(content.offsets)
    offsets = content.offsets + np.arange(len(counts) + 1, dtype=np.int64)
    last = offsets[1:] - 1  # the new segment closes each request
    keep = np.ones(len(content.seg_ids) + len(counts), bool)
    keep[last] = False
    seg_ids = np.empty(len(keep), np.int64)
    seg_lens = np.empty(len(keep), np.int64)
    seg_ids[keep], seg_lens[keep] = content.seg_ids, content.seg_lens
    seg_ids[last], seg_lens[last] = content.output_ids, outputs
    return PromptContent(seg_ids, seg_lens, offsets, content.output_ids)
