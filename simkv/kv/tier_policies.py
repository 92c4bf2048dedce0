"""Eviction policies of an offload tier (:class:`~simkv.kv.tier_store.TierStore`): which
block leaves a full tier.

A policy orders the keys a tier holds; the store asks it for candidates best-victim first
(:meth:`TierPolicy.victims`) and evicts the first it may (a block being stored or loaded may
not leave, as vLLM's offloading managers skip blocks that are not ready or have a reference).
Three ship:

* :class:`LruPolicy` (``lru``): the least recently stored or hit block leaves first, as vLLM's
  ``LRUOffloadingManager`` (``vllm/v1/kv_offload/lru_manager.py``, 0.11+).
* :class:`ArcPolicy` (``arc``): adaptive replacement (Megiddo & Modha, FAST'03) as vLLM's
  ``ARCOffloadingManager`` (``vllm/v1/kv_offload/arc_manager.py``): blocks seen once (T1) and
  more than once (T2), ghost lists of what each evicted (B1, B2) moving the target size of T1.
* :class:`FrequencyPolicy` (``frequency``): a count per block, doubled on a hit and halved at
  every engine step of the replicas using the tier (the frequency policy of NVIDIA Dynamo's
  KV block manager); the smallest count leaves first, the least recent on a tie.

**Adding a policy**: a class with these four methods, named in ``TierConfig.eviction`` and in
:func:`make_policy`; ``tests/kv/test_tier_store.py``'s ``FifoPolicy`` is a worked example
(oldest stored first, hits ignored) in twelve lines.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Iterator
from typing import Protocol

__all__ = ["ArcPolicy", "FrequencyPolicy", "LruPolicy", "TierPolicy", "make_policy"]


class TierPolicy(Protocol):
    """The order in which a tier's blocks leave. ``clock`` counts the engine steps of the
    replicas using the tier (only :class:`FrequencyPolicy` reads it)."""

    def add(self, key: int, clock: int) -> None:
        """``key`` entered the tier."""

    def hit(self, key: int, clock: int) -> None:
        """A request hit ``key`` (it is loaded)."""

    def remove(self, key: int) -> None:
        """``key`` left the tier (evicted)."""

    def victims(self) -> Iterator[int]:
        """The tier's keys, the one to evict first first (the store may skip some). The
        caller takes one key from a fresh iterator and drops it before it calls
        :meth:`remove` (the iterator may be a live view)."""


class LruPolicy:
    """Least recently used: stores and hits move a key to the back."""

    def __init__(self) -> None:
        self._order: OrderedDict[int, None] = OrderedDict()

    def add(self, key: int, clock: int) -> None:
        self._order[key] = None

    def hit(self, key: int, clock: int) -> None:
        self._order.move_to_end(key)

    def remove(self, key: int) -> None:
        del self._order[key]

    def victims(self) -> Iterator[int]:
        return iter(self._order)


class ArcPolicy:
    """Adaptive replacement over ``capacity`` blocks: T1 holds keys hit once (stored, never
    loaded since), T2 keys hit again; B1 and B2 remember the keys each evicted (at most
    ``capacity`` each). A store of a key remembered in B1 grows T1's target ``p``, one in B2
    shrinks it; victims come from T1 while it exceeds ``p``, else from T2.

    Invariant: T1 and T2 are disjoint and hold exactly the tier's keys."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.p = 0.0  # target size of T1
        self._t1: OrderedDict[int, None] = OrderedDict()
        self._t2: OrderedDict[int, None] = OrderedDict()
        self._b1: OrderedDict[int, None] = OrderedDict()
        self._b2: OrderedDict[int, None] = OrderedDict()

    def add(self, key: int, clock: int) -> None:
        if key in self._b1:
            self.p = min(self.capacity, self.p + max(len(self._b2) / len(self._b1), 1.0))
            del self._b1[key]
            self._t2[key] = None
        elif key in self._b2:
            self.p = max(0.0, self.p - max(len(self._b1) / len(self._b2), 1.0))
            del self._b2[key]
            self._t2[key] = None
        else:
            self._t1[key] = None

    def hit(self, key: int, clock: int) -> None:
        if key in self._t1:
            del self._t1[key]
        else:
            del self._t2[key]
        self._t2[key] = None

    def remove(self, key: int) -> None:
        if key in self._t1:
            del self._t1[key]
            ghosts = self._b1
        else:
            del self._t2[key]
            ghosts = self._b2
        ghosts[key] = None
        if len(ghosts) > self.capacity:
            ghosts.popitem(last=False)

    def victims(self) -> Iterator[int]:
        first, second = (self._t1, self._t2) if len(self._t1) > self.p else (self._t2, self._t1)
        return itertools.chain(first, second)


class FrequencyPolicy:
    """A count per key, doubled on a hit and halved every step. Kept as ``score = log2(count)
    + step of its last change``, which orders keys as their current counts do and is
    unchanged while they decay: a new key scores the current step, a hit adds one. A heap of
    (score, order, key) with stale entries skipped."""

    def __init__(self) -> None:
        self._score: dict[int, int] = {}
        self._heap: list[tuple[int, int, int]] = []
        self._order = 0

    def _push(self, key: int, score: int) -> None:
        self._score[key] = score
        self._order += 1
        heapq.heappush(self._heap, (score, self._order, key))

    def add(self, key: int, clock: int) -> None:
        self._push(key, clock)

    def hit(self, key: int, clock: int) -> None:
        self._push(key, self._score[key] + 1)

    def remove(self, key: int) -> None:
        del self._score[key]

    def victims(self) -> Iterator[int]:
        heap, score, seen = self._heap, self._score, []
        try:
            while heap:
                entry = heapq.heappop(heap)
                if score.get(entry[2]) == entry[0]:  # (else stale: dropped)
                    seen.append(entry)
                    yield entry[2]
        finally:  # the ones offered go back (the store removes the one it evicts)
            for entry in seen:
                heapq.heappush(heap, entry)


def make_policy(name: str, capacity: int) -> TierPolicy:
    """The policy ``TierConfig.eviction`` names, for a tier of ``capacity`` blocks."""
    if name == "lru":
        return LruPolicy()
    if name == "arc":
        return ArcPolicy(capacity)
    if name == "frequency":
        return FrequencyPolicy()
    raise ValueError(f"unknown tier eviction policy {name!r}")
