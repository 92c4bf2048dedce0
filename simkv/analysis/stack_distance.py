"""LRU stack distances of a block-access sequence, offline and vectorised.

An LRU cache of ``C`` blocks holds, at any moment, the ``C`` most recently used distinct keys
(Mattson et al., 1970: LRU is a *stack algorithm*, a smaller cache's content is always part of
a larger one's). So one pass gives the hits of every capacity: a key is found by a cache of
``C`` blocks exactly when its *stack distance* — 1 + the number of distinct keys used since its
own last use — is at most ``C``.

The sequence here is grouped: accesses come in *groups* (a request's blocks) and a key is looked
up against the cache as it was when its group began, so the distinct keys counted are those
used in ``(p, q)``, ``p`` the key's previous use and ``q`` its group's first position. With
``prev[t]`` the previous use of the key at position ``t`` (−1 for none), a key used in
``(p, q)`` is counted once, at its first use there, the one position ``t`` with
``prev[t] < p``. So the distance is ``1 + #{t ∈ (p, q) : prev[t] < p}``: a range count of values
below a threshold, answered for all accesses at once by :func:`count_less` (a wavelet matrix
walked level by level, ``O((n + queries) · log n)`` numpy work, no per-access Python).
"""

from __future__ import annotations

import numpy as np

from simkv.kv.errors import InvariantViolation


def previous_use(keys: np.ndarray) -> np.ndarray:
    """For each position, the previous position holding the same key, −1 for none (int64)."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    prev = np.full(len(keys), -1, np.int64)
    same = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
    prev[order[same + 1]] = order[same]
    return prev


def count_less(
    values: np.ndarray, lo: np.ndarray, hi: np.ndarray, threshold: np.ndarray
) -> np.ndarray:
    """For each query ``i``: ``#{t : lo[i] ≤ t < hi[i], values[t] < threshold[i]}``.

    ``values`` and ``threshold`` are non-negative integers. One pass per bit of the largest
    value, most significant first (a wavelet matrix): each level stably splits the values by
    their bit and moves every query's range into the half that still agrees with its threshold,
    counting the half below it on the way. Only the current level is ever held.
    """
    n = len(values)
    index = np.int32 if n < 2**31 - 1 else np.int64  # positions: half the memory traffic
    lo, hi = np.asarray(lo, index).copy(), np.asarray(hi, index).copy()
    threshold = np.asarray(threshold, np.int64)
    if np.any(lo > hi) or (len(lo) and (lo.min() < 0 or hi.max() > n)):
        raise ValueError("query ranges must satisfy 0 <= lo <= hi <= len(values)")
    found = np.zeros(len(lo), np.int64)
    top = max(int(np.max(values, initial=0)), int(threshold.max(initial=0)))
    values = np.asarray(values, np.int32 if top < 2**31 else np.int64)
    zeros = np.zeros(n + 1, index)
    for bit in range(top.bit_length() - 1, -1, -1):
        ones = (values & (1 << bit)) != 0
        np.cumsum(~ones, out=zeros[1:])
        below, z_lo, z_hi = zeros[-1], zeros[lo], zeros[hi]
        up = (threshold & (1 << bit)) != 0
        found += np.where(up, z_hi - z_lo, 0)
        lo = np.where(up, below + lo - z_lo, z_lo)
        hi = np.where(up, below + hi - z_hi, z_hi)
        values = np.concatenate((values[~ones], values[ones]))
    return found


def grouped_stack_distances(keys: np.ndarray, group_start: np.ndarray) -> np.ndarray:
    """Stack distance of each access (int64; 0 = never used before, an infinite distance).

    ``group_start[t]`` is the first position of the group of access ``t``; a key appears at
    most once per group (else :class:`InvariantViolation`). The distance counts the distinct
    keys used between the key's previous use and its group's start, plus one (see the module
    docstring): an LRU cache of ``C`` blocks that took in every earlier group holds the key
    when its group starts exactly when the distance is between 1 and ``C``.
    """
    keys = np.asarray(keys, np.int64)
    group_start = np.asarray(group_start, np.int64)
    prev = previous_use(keys)
    if np.any(prev >= group_start):
        raise InvariantViolation("a key appears twice in one group of accesses")
    seen = np.flatnonzero(prev >= 0)
    # queries in order of their range's start: the counts' gathers then read memory mostly in
    # order (about a fifth faster than in access order on millions of accesses)
    seen = seen[np.argsort(prev[seen], kind="stable")]
    p = prev[seen]
    distance = np.zeros(len(keys), np.int64)
    distance[seen] = 1 + count_less(prev + 1, p + 1, group_start[seen], p + 1)
    return distance
