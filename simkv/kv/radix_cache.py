"""SGLang's RadixAttention at block granularity (its page size; ``block_size: 1`` gives token
granularity): blocks without cached content are reused first, then the least recently used
*leaf* of the tree of cached prefixes, so a prefix is never evicted while a longer cached prefix
extends it.

A :class:`~simkv.kv.prefix_cache.PrefixCache`; see ``prefix_cache.py`` for the contract.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from simkv.kv.errors import InvariantViolation
from simkv.kv.free_queue import BlockId, FreeQueue, make_free_queue
from simkv.kv.prefix_cache import BlockKeys


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
    by_owner: bool = field(default=False, init=False)  # every block is keyed, none by count

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
        parent_key = node.parent
        parent = self._nodes.get(parent_key) if parent_key is not None else None
        if parent_key is not None and parent is not None:
            parent.children -= 1
            self._offer(parent_key, parent)
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

    def push_many(
        self, block_ids: Sequence[BlockId], owner: int | None = None, registered: int = 0
    ) -> None:
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

    def lookup_stream(self, keys: BlockKeys, limit: int) -> list[BlockId]:
        """:meth:`lookup` of a request's first ``limit`` block keys."""
        return self.lookup(keys.extend(limit)[:limit])

    def insert_stream(
        self, keys: BlockKeys, blocks: Sequence[BlockId], start: int, stop: int
    ) -> None:
        """``insert`` blocks ``start`` to ``stop - 1`` of one request, each under its parent."""
        key_list = keys.extend(stop)
        for j in range(start, stop):
            self.insert(key_list[j], key_list[j - 1] if j else None, blocks[j])

    def remove_many(self, block_ids: Sequence[BlockId], owner: int | None = None) -> None:
        for block_id in block_ids:
            self.remove(block_id)

    def owned_filled(self, n: int) -> None:
        """Never called: this cache keys every block (``by_owner`` is False)."""
        raise InvariantViolation("a radix cache registers every block by key, never by count")

    @property
    def cached_blocks(self) -> int:
        return len(self._nodes)
