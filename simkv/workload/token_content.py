"""Prompt content from real token ids: segments that make prefix sharing exact.

:class:`~simkv.workload.content.PromptContent` identifies a token by the segments before it and
its offset in its own segment. From token ids we build the segments of a *radix tree* (a
compressed trie) of all prompts: a node wherever a prompt ends or two prompts part, and one
segment per edge, its id naming the edge. Then the first ``T`` tokens of two prompts are equal
exactly when their segment lists agree up to token ``T``: equal prefixes walk the same edges,
and at the first differing token both walks leave the same node by different edges (different
ids). So :func:`~simkv.workload.content.block_keys` of two requests agree on block ``j`` exactly
when their first ``(j + 1) · block_size`` token ids are equal, at every block size; generated
tokens (``output_ids``, one id per request) match nothing.

A prompt has one segment per node on its path, so prompts that share nothing are one segment
each and :class:`~simkv.workload.content.KeyStream` hashes their blocks at its fast rate.

The tree is never built token by token. Sorted lexicographically, prompts sharing a prefix are
contiguous, and with ``lcp[k]`` the longest common prefix of sorted neighbours ``k, k + 1``:

* the nodes on prompt ``k``'s path are at the depths ``{min(lcp[j..k-1]) : j < k}`` ∪
  ``{min(lcp[k..m]) : m ≥ k}`` ∪ ``{len(k)}`` (without 0) — where it parts from (or ends beside)
  another prompt, and its end;
* the node at depth ``d`` is named by ``(first, d)``, ``first`` the leftmost sorted prompt of
  the run sharing those ``d`` tokens with ``k``.

Monotone stacks give both in one pass each way: O(total tokens) to compare neighbours plus
O(total segments) after the sort.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import pairwise

import numpy as np

from simkv.workload.content import PromptContent


def _sorted_lcp(prompts: list[np.ndarray]) -> tuple[list[int], list[int]]:
    """Lexicographic order of the prompts and the common-prefix length of sorted neighbours."""
    keys = [p.astype(">u8").tobytes() for p in prompts]  # big-endian: byte order = token order
    order = sorted(range(len(prompts)), key=keys.__getitem__)
    lcp = []
    for a, b in pairwise(order):
        x, y = prompts[a], prompts[b]
        m = min(len(x), len(y))
        differ = np.flatnonzero(x[:m] != y[:m])
        lcp.append(int(differ[0]) if len(differ) else m)
    return order, lcp


def _right_depths(lcp: list[int], n: int) -> list[list[int]]:
    """For each sorted position k: the distinct values of min(lcp[k..m]), m ≥ k, ascending."""
    out: list[list[int]] = [[] for _ in range(n)]
    stack: list[int] = []
    for k in range(n - 2, -1, -1):
        while stack and stack[-1] >= lcp[k]:
            stack.pop()
        stack.append(lcp[k])
        out[k] = stack.copy()
    return out


def _check(prompts: Sequence[np.ndarray]) -> list[np.ndarray]:
    arrays = [np.asarray(p) for p in prompts]
    for i, ids in enumerate(arrays):
        if ids.ndim != 1 or len(ids) == 0 or ids.dtype.kind not in "iu" or ids.min() < 0:
            raise ValueError(f"prompt {i}: expected a non-empty 1-D array of token ids ≥ 0")
    return [ids.astype(np.int64) for ids in arrays]


def content_from_token_ids(prompts: Sequence[np.ndarray]) -> PromptContent:
    """Segments for each prompt (token ids ≥ 0, one array per request) that share a block key
    exactly when the token ids up to that block's end are equal (see the module docstring).

    Segment ids are 0, 1, … in order of first use; request ``i``'s ``output_id`` is
    ``(number of segment ids) + i``. ValueError for an empty prompt or a negative id.
    """
    arrays = _check(prompts)
    n = len(arrays)
    order, lcp = _sorted_lcp(arrays)
    right = _right_depths(lcp, n)
    node_ids: dict[tuple[int, int], int] = {}
    segments: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    left_depths: list[int] = []  # ascending: the distinct min(lcp[j..k-1]), j < k
    left_first: list[int] = []  # ... and the leftmost j reaching each of them
    for k, request in enumerate(order):
        if k:
            first = k - 1
            while left_depths and left_depths[-1] >= lcp[k - 1]:
                left_depths.pop()
                first = left_first.pop()
            left_depths.append(lcp[k - 1])
            left_first.append(first)
        length = len(arrays[request])
        depths = sorted({*left_depths, *right[k], length} - {0})
        start = 0
        for depth in depths:
            at = bisect_left(left_depths, depth)
            first = left_first[at] if at < len(left_depths) else k
            node = node_ids.setdefault((first, depth), len(node_ids))
            segments[request].append((node, depth - start))
            start = depth
    outputs = len(node_ids) + np.arange(n, dtype=np.int64)
    return PromptContent.from_lists(segments, outputs)
