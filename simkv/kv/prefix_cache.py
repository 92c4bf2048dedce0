"""Prefix caches: content-keyed full blocks that outlive their requests, and their eviction.

Both caches are the allocator's free queue (:class:`~simkv.kv.allocator.FreeQueue`): the order
in which free blocks are reused *is* the eviction order, and a cached block loses its content
only when it is reused (lazy eviction). Keys are the chained block keys of
:func:`simkv.workload.content.block_keys`; only full blocks are cached.

* :class:`HashPrefixCache` follows vLLM 0.11's automatic prefix caching: one FIFO free queue of
  every free block, cached or not; a request's blocks are freed tail first, so the least
  recently used block (and, within a request, its last block) is evicted first; a hit on a free
  cached block takes it off the queue.
* :class:`RadixPrefixCache` follows SGLang's RadixAttention at block granularity (its page size;
  ``block_size: 1`` gives token granularity): blocks without cached content are reused first,
  then the least recently used *leaf* of the tree of cached prefixes, so a prefix is never
  evicted while a longer cached prefix extends it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from simkv.kv.free_queue import BlockId, FifoFreeQueue, FreeQueue, ReuseOrder, make_free_queue
from simkv.workload.content import KeyStream, UniqueKeys


class HashPrefixCache:
    """vLLM 0.11 hash-based prefix cache over a FIFO (or LIFO) free queue.

    Invariants: ``block_of`` (key → block) and ``key_of`` (block → key, ``None`` when the block
    holds nothing cached; a list indexed by block id) are inverse maps; a cached block is either
    in use (refcount ≥ 1) or in the free queue; ``pop`` evicts the block it returns.

    Requests without content (:class:`~simkv.workload.content.UniqueKeys`: keys only they can
    hit) are kept without any per-block entry under FIFO reuse (``by_owner``): their
    registration is a count; when one frees its blocks (:meth:`retire`, then the allocator's
    push) it notes which blocks held its keys and where they entered the free queue, whose
    push marks them; popping marked entries counts evictions by position range; a lookup is the
    part of its note the queue's head has not passed. This is the same cache: under FIFO a
    freed request's blocks are evicted last block first, so what survives of it is always a
    prefix and every registration succeeds (no key is ever held twice).
    ``tests/engine/test_prefix_engine.py`` runs engines both ways and compares.
    """

    def __init__(
        self, num_blocks: int, reuse: ReuseOrder | str = ReuseOrder.FIFO, by_owner: bool = True
    ) -> None:
        self._queue = make_free_queue(range(num_blocks), reuse)
        self.block_of: dict[int, BlockId] = {}
        self.key_of: list[int | None] = [None] * num_blocks
        self.evictions = 0
        self.by_owner = by_owner and isinstance(self._queue, FifoFreeQueue)
        self._owned = 0  # cached blocks of content-less requests (not in block_of)
        self._seen_marked = 0  # the queue's marked_popped already counted as evictions
        self._retiring: tuple[UniqueKeys, int, int] | None = None  # (request, blocks, cached)
        self._reviving: tuple[int, int] | None = None  # queue positions of a note taken back

    # -- free queue ---------------------------------------------------------------------------
    def pop(self) -> BlockId:
        return self.pop_many(1)[0]

    def _count_owned_evictions(self) -> None:
        popped = self._queue.marked_popped  # type: ignore[attr-defined]
        if popped != self._seen_marked:
            self._owned -= popped - self._seen_marked
            self.evictions += popped - self._seen_marked
            self._seen_marked = popped

    def push(self, block_id: BlockId) -> None:
        self._queue.push(block_id)

    def pop_many(self, n: int) -> list[BlockId]:
        blocks = self._queue.pop_many(n)
        if self.block_of:
            key_of, block_of, evicted = self.key_of, self.block_of, 0
            for block in blocks:
                key = key_of[block]
                if key is not None:
                    key_of[block] = None
                    del block_of[key]
                    evicted += 1
            self.evictions += evicted
        if self.by_owner:
            self._count_owned_evictions()
        return blocks

    def push_many(self, block_ids: Sequence[BlockId]) -> None:
        retiring = self._retiring
        if retiring is None:
            self._queue.push_many(block_ids)
            return
        self._retiring = None
        stream, n, cached = retiring
        if len(block_ids) != n:
            raise AssertionError("a content-less request's blocks are never shared")
        queue: FifoFreeQueue = self._queue  # type: ignore[assignment]
        stream.end = queue.end_position + n  # its block j enters at end - 1 - j (tail first)
        stream.mark = queue.push_many(block_ids, cached)

    def reviving(self, stream: KeyStream | UniqueKeys, hits: int) -> bool:
        """A request is about to take back ``hits`` of its cached free blocks
        (:meth:`lookup_stream`'s), all at once (the allocator's ``revive_many``, next).

        Returns whether they are a content-less request's note: then they sit at consecutive
        queue positions, taken out in one step, and they are all free (never shared)."""
        if not (self.by_owner and isinstance(stream, UniqueKeys) and stream.mark is not None):
            return False
        if hits != self._queued_of_note(stream):
            raise AssertionError("a lookup takes every block of its note still queued")
        queue: FifoFreeQueue = self._queue  # type: ignore[assignment]
        queue.unmark(stream.mark)
        stream.mark = None
        self._reviving = (stream.end - hits, stream.end)
        return True

    def remove_many(self, block_ids: Sequence[BlockId]) -> None:
        """``remove`` each of ``block_ids`` (a note announced by :meth:`reviving`: one range)."""
        span = self._reviving
        if span is None:
            for block_id in block_ids:
                self._queue.remove(block_id)
            return
        self._reviving = None
        queue: FifoFreeQueue = self._queue  # type: ignore[assignment]
        queue.remove_range(*span, block_ids[::-1])  # block j entered at end - 1 - j

    def remove(self, block_id: BlockId) -> None:
        self._queue.remove(block_id)

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[BlockId]:
        return iter(self._queue)

    # -- cache --------------------------------------------------------------------------------
    def lookup(self, keys: Sequence[int]) -> list[BlockId]:
        """Blocks of the longest cached prefix of ``keys`` (stops at the first miss)."""
        hits: list[BlockId] = []
        block_of = self.block_of
        for key in keys:
            block = block_of.get(key)
            if block is None:
                break
            hits.append(block)
        return hits

    def lookup_stream(self, stream: KeyStream | UniqueKeys, limit: int) -> list[BlockId]:
        """:meth:`lookup` of a request's first ``limit`` block keys."""
        if not (self.by_owner and isinstance(stream, UniqueKeys)):
            return self.lookup(stream.extend(limit)[:limit])
        surviving = self._queued_of_note(stream)
        return stream.cached[: min(surviving, limit)] if surviving > 0 else []

    def _queued_of_note(self, stream: UniqueKeys) -> int:
        """How many blocks of a content-less request's note the queue head has not passed
        (its first ones: they entered the queue last)."""
        end, head = stream.end, self._queue.head_position  # type: ignore[attr-defined]
        return end - max(head, end - len(stream.cached))

    def insert(self, key: int, parent: int | None, block: BlockId) -> bool:
        """Cache a full, computed block; False if the key is cached already (first one wins)."""
        if key in self.block_of or self.key_of[block] is not None:
            return False
        self.block_of[key] = block
        self.key_of[block] = key
        return True

    def insert_stream(
        self, stream: KeyStream | UniqueKeys, blocks: Sequence[BlockId], start: int, stop: int
    ) -> None:
        """``insert`` blocks ``start`` to ``stop - 1`` of one request (``blocks[j]`` holds its
        ``j``-th block key)."""
        if self.by_owner and isinstance(stream, UniqueKeys):
            self._owned += stop - start  # noted when the blocks are freed (retire)
            return
        keys, block_of, key_of = stream.extend(stop), self.block_of, self.key_of
        for j in range(start, stop):
            key, block = keys[j], blocks[j]
            if key not in block_of and key_of[block] is None:
                block_of[key] = block
                key_of[block] = key

    def owned_filled(self, n: int) -> None:
        """``n`` content-less requests each filled one more block (registered by count)."""
        self._owned += n

    def retire(self, stream: KeyStream | UniqueKeys, blocks: list[BlockId], cached: int) -> None:
        """A request is about to free ``blocks``, the first ``cached`` of them registered."""
        if self.by_owner and isinstance(stream, UniqueKeys):
            stream.cached = blocks[:cached]
            if blocks:  # the allocator pushes them next (push_many)
                self._retiring = (stream, len(blocks), cached)

    @property
    def cached_blocks(self) -> int:
        return len(self.block_of) + self._owned


@dataclass(slots=True)
class _Node:
    block: BlockId
    parent: int | None
    children: int = 0
    stamp: int = 0
    free: bool = False


@dataclass(slots=True)
class RadixPrefixCache:
    """SGLang-style radix cache at block granularity: LRU leaves are evicted first.

    Invariants: every node's ``children`` counts the cached nodes whose ``parent`` is it; an
    evictable block (in the heap with its current stamp) is free, cached and a leaf.
    """

    num_blocks: int
    _uncached: FreeQueue = field(init=False)
    _nodes: dict[int, _Node] = field(default_factory=dict)
    _key_of: dict[BlockId, int] = field(default_factory=dict)
    _heap: list[tuple[int, int]] = field(default_factory=list)  # (stamp, key)
    _free_cached: int = 0
    _clock: int = 0
    evictions: int = 0

    def __post_init__(self) -> None:
        self._uncached = make_free_queue(range(self.num_blocks))

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _offer(self, key: int, node: _Node) -> None:
        if node.free and node.children == 0:
            heapq.heappush(self._heap, (node.stamp, key))

    # -- free queue ---------------------------------------------------------------------------
    def pop(self) -> BlockId:
        if len(self._uncached):
            return self._uncached.pop()
        while self._heap:
            stamp, key = heapq.heappop(self._heap)
            node = self._nodes.get(key)
            if node is not None and node.free and node.children == 0 and node.stamp == stamp:
                return self._evict(key, node)
        key = min(self._free_keys(), key=lambda k: self._nodes[k].stamp)  # only inner nodes left
        return self._evict(key, self._nodes[key])

    def _free_keys(self) -> Iterator[int]:
        return (k for k, n in self._nodes.items() if n.free)

    def _evict(self, key: int, node: _Node) -> BlockId:
        del self._nodes[key]
        del self._key_of[node.block]
        self._free_cached -= 1
        self.evictions += 1
        parent = self._nodes.get(node.parent) if node.parent is not None else None
        if parent is not None:
            parent.children -= 1
            self._offer(node.parent, parent)  # type: ignore[arg-type]
        if node.children:  # only when no leaf was evictable: orphan the subtree
            for child in self._nodes.values():
                if child.parent == key:
                    child.parent = None  # unreachable now: lookups stop at the evicted prefix
        return node.block

    def push(self, block_id: BlockId) -> None:
        key = self._key_of.get(block_id)
        if key is None:
            self._uncached.push(block_id)
            return
        node = self._nodes[key]
        node.free, node.stamp = True, self._tick()
        self._free_cached += 1
        self._offer(key, node)

    def pop_many(self, n: int) -> list[BlockId]:
        return [self.pop() for _ in range(n)]

    def push_many(self, block_ids: Sequence[BlockId]) -> None:
        for block_id in block_ids:
            self.push(block_id)

    def remove(self, block_id: BlockId) -> None:
        key = self._key_of.get(block_id)
        if key is None:
            self._uncached.remove(block_id)
            return
        self._nodes[key].free = False
        self._free_cached -= 1

    def __len__(self) -> int:
        return len(self._uncached) + self._free_cached

    def __iter__(self) -> Iterator[BlockId]:
        yield from self._uncached
        yield from (self._nodes[k].block for k in self._free_keys())

    # -- cache --------------------------------------------------------------------------------
    def lookup(self, keys: Sequence[int]) -> list[BlockId]:
        """Blocks of the longest cached prefix; matched nodes become most recently used."""
        hits: list[BlockId] = []
        stamp = self._tick()
        for key in keys:
            node = self._nodes.get(key)
            if node is None:
                break
            node.stamp = stamp
            self._offer(key, node)  # its heap entry carries the new stamp
            hits.append(node.block)
        return hits

    def insert(self, key: int, parent: int | None, block: BlockId) -> bool:
        """Cache a full, computed block under its parent prefix; False if already cached or
        the parent prefix is no longer cached."""
        if key in self._nodes or block in self._key_of:
            return False
        if parent is not None and parent not in self._nodes:
            return False
        self._nodes[key] = _Node(block, parent, stamp=self._tick())
        self._key_of[block] = key
        if parent is not None:
            self._nodes[parent].children += 1
        return True

    def lookup_stream(self, stream: KeyStream | UniqueKeys, limit: int) -> list[BlockId]:
        """:meth:`lookup` of a request's first ``limit`` block keys."""
        return self.lookup(stream.extend(limit)[:limit])

    def insert_stream(
        self, stream: KeyStream | UniqueKeys, blocks: Sequence[BlockId], start: int, stop: int
    ) -> None:
        """``insert`` blocks ``start`` to ``stop - 1`` of one request, each under its parent."""
        keys = stream.extend(stop)
        for j in range(start, stop):
            self.insert(keys[j], keys[j - 1] if j else None, blocks[j])

    def reviving(self, stream: KeyStream | UniqueKeys, hits: int) -> bool:
        """A request is about to take back cached blocks (nothing to note here)."""
        return False

    def remove_many(self, block_ids: Sequence[BlockId]) -> None:
        for block_id in block_ids:
            self.remove(block_id)

    def retire(self, stream: KeyStream | UniqueKeys, blocks: list[BlockId], cached: int) -> None:
        """A request is about to free its blocks (nothing to note here)."""

    @property
    def cached_blocks(self) -> int:
        return len(self._nodes)
