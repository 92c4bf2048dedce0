"""Eviction order and hit rules of the prefix caches, on hand-computed scenarios; notes of
private requests against the key map; a new policy through the protocol."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simkv.kv
from simkv.kv.allocator import BlockAllocator, BlockId, InvariantViolation
from simkv.kv.free_queue import OrderedFreeQueue
from simkv.kv.hash_cache import HashPrefixCache
from simkv.kv.prefix_cache import BlockKeys, PrefixCache
from simkv.kv.radix_cache import RadixPrefixCache

K0, K1, K2, K3 = 100, 101, 102, 103


def _hash_pool(n: int) -> tuple[BlockAllocator, HashPrefixCache]:
    cache = HashPrefixCache(n)
    return BlockAllocator(n, 4, free_queue=cache), cache


def test_hash_lookup_stops_at_first_miss() -> None:
    a, cache = _hash_pool(4)
    blocks = a.alloc_many(3)  # 0, 1, 2
    for key, block in zip((K0, K1, K2), blocks, strict=True):
        assert cache.insert(key, block)
    assert cache.lookup([K0, K1, K2]) == [0, 1, 2]
    assert cache.lookup([K0, K3, K2]) == [0]
    assert cache.lookup([K3, K0]) == []
    assert not cache.insert(K0, BlockId(3))  # first one wins


def test_hash_evicts_lazily_in_free_queue_order_tail_first() -> None:
    a, cache = _hash_pool(4)
    blocks = a.alloc_many(3)
    for key, block in zip((K0, K1, K2), blocks, strict=True):
        cache.insert(key, block)
    for block in reversed(blocks):  # a request frees its tail first
        a.free(block)
    assert list(cache) == [3, 2, 1, 0]
    assert cache.cached_blocks == 3  # freed blocks stay cached
    assert a.alloc() == 3 and cache.evictions == 0  # uncached block: nothing evicted
    assert a.alloc() == 2 and cache.evictions == 1  # the tail block goes first
    assert cache.lookup([K0, K1, K2]) == [0, 1]
    a.revive(BlockId(0))  # a hit on a free cached block takes it off the queue
    assert list(cache) == [1]
    a.free(BlockId(0))  # freed again: most recently used, last to go
    assert list(cache) == [1, 0]
    assert a.alloc() == 1 and cache.lookup([K0, K1]) == [0]


def test_radix_reuses_uncached_blocks_then_lru_leaves() -> None:
    cache = RadixPrefixCache(6)
    a = BlockAllocator(6, 4, free_queue=cache)
    b = a.alloc_many(4)  # 0..3: chain K0 → K1 → K2 and a branch K0 → K3
    cache.insert(K0, None, b[0])
    cache.insert(K1, K0, b[1])
    cache.insert(K2, K1, b[2])
    cache.insert(K3, K0, b[3])
    for block in (b[2], b[1], b[3], b[0]):
        a.free(block)
    assert len(cache) == 6 and cache.cached_blocks == 4
    assert cache.lookup([K0, K1, K2]) == [0, 1, 2]  # K0, K1, K2 become most recent
    assert [a.alloc(), a.alloc()] == [4, 5]  # never-cached blocks first
    assert a.alloc() == 3 and cache.lookup([K0, K3]) == [0]  # LRU leaf: the K3 branch
    assert a.alloc() == 2  # then K2, the leaf of the other chain …
    assert a.alloc() == 1  # … after which K1 is a leaf
    assert a.alloc() == 0 and cache.evictions == 4 and cache.cached_blocks == 0


def test_radix_never_evicts_a_prefix_of_a_cached_leaf_in_use() -> None:
    cache = RadixPrefixCache(3)
    a = BlockAllocator(3, 4, free_queue=cache)
    b = a.alloc_many(2)
    cache.insert(K0, None, b[0])
    cache.insert(K1, K0, b[1])
    a.free(b[0])  # the prefix is free but its extension K1 is still in use
    assert a.alloc() == 2  # uncached block first
    assert cache.lookup([K0, K1]) == [0, 1]
    a.free(b[1])
    assert a.alloc() == 1  # K1 (a leaf) goes before K0
    assert cache.lookup([K0]) == [0]


class Private:
    """``BlockKeys`` only one request can hit (as the workload's ``UniqueKeys``): the caches
    see an owner id and plain negative keys, nothing of the workload."""

    def __init__(self, owner: int) -> None:
        self.owner = owner

    def extend(self, num_blocks: int) -> range:
        base = -(self.owner << 20) - 1
        return range(base, base - (1 << 20), -1)


R, NB = 4, 10
# ("admit", r, blocks) | ("register", r, blocks more) | ("free", r, _) | ("take", _, n) (an
# anonymous user allocates n blocks: evictions) | ("give", _, _) (it frees them)
request_ops = st.lists(
    st.one_of(
        st.tuples(st.just("admit"), st.integers(0, R - 1), st.integers(0, 5)),
        st.tuples(st.just("register"), st.integers(0, R - 1), st.integers(0, 4)),
        st.tuples(st.just("free"), st.integers(0, R - 1), st.just(0)),
        st.tuples(st.just("take"), st.just(0), st.integers(1, 4)),
        st.tuples(st.just("give"), st.just(0), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops=request_ops)
def test_notes_by_owner_match_the_key_map(ops: list[tuple[str, int, int]]) -> None:
    """A cache that keeps private requests by owner (notes of queue positions) hands out,
    hits, counts and evicts exactly as one that keys every block."""
    caches = [HashPrefixCache(NB, by_owner=True), HashPrefixCache(NB, by_owner=False)]
    pools = [BlockAllocator(NB, 4, free_queue=cache) for cache in caches]
    assert caches[0].by_owner and not caches[1].by_owner
    tables: dict[int, list[BlockId]] = {}
    registered = dict.fromkeys(range(R), 0)  # while resident; at its last free otherwise
    anonymous: list[BlockId] = []
    for op, r, n in ops:
        keys = Private(r)
        if op == "admit" and r not in tables:
            n = max(n, registered[r])  # a lookup's limit covers what it registered
            hits = [cache.lookup_stream(keys, n) for cache in caches]
            assert hits[0] == hits[1]
            if n <= pools[0].free_blocks:
                for pool in pools:
                    if hits[0]:  # (only a hit takes a note back)
                        pool.revive_many(hits[0], r)
                new = [pool.alloc_many(n - len(hits[0])) for pool in pools]
                assert new[0] == new[1]
                tables[r], registered[r] = hits[0] + new[0], len(hits[0])
        elif op == "register" and r in tables:
            stop = min(len(tables[r]), registered[r] + n)
            for cache in caches:
                cache.insert_stream(keys, tables[r], registered[r], stop)
            registered[r] = stop
        elif op == "free" and r in tables:
            for pool in pools:
                assert pool.release(tables[r], r, registered[r]) == 0
            del tables[r]
        elif op == "take" and n <= pools[0].free_blocks:
            taken = [pool.alloc_many(n) for pool in pools]
            assert taken[0] == taken[1]
            anonymous += taken[0]
        elif op == "give":
            for pool in pools:
                pool.release(anonymous)
            anonymous = []
        for pool in pools:
            pool.check()
        assert list(caches[0]) == list(caches[1])
        assert caches[0].evictions == caches[1].evictions
        assert caches[0].cached_blocks == caches[1].cached_blocks
        for other in set(range(R)) - set(tables):
            lookups = [cache.lookup_stream(Private(other), NB) for cache in caches]
            assert lookups[0] == lookups[1]


def test_owner_notes_survive_compaction_and_stay_bounded() -> None:
    """Long runs compact the queue (positions stay absolute): every noted block the head
    passes is one eviction, a note taken back is none, and only notes still queued are kept."""
    cache = HashPrefixCache(8)
    expected, registered, noted = 0, 0, set()
    for block in range(8, 20_008):
        marked = int(block % 5 == 0)
        cache.insert_stream(Private(block), [BlockId(block)], 0, marked)
        cache.push_many([BlockId(block)], owner=block, registered=marked)
        registered += marked
        if marked:
            noted.add(block)
            if block % 7 == 0:  # its owner takes it back: not an eviction
                assert cache.lookup_stream(Private(block), 1) == [block]
                cache.remove_many([BlockId(block)], owner=block)
                noted.discard(block)
        if len(cache) < 4:
            continue
        popped = cache.pop_many(2) if block % 2 else [cache.pop()]
        expected += len(noted & set(popped))
        noted -= set(popped)
        assert len(cache._notes) == len(noted)  # a note goes once the head passed it
    fifo = cache._fifo
    assert fifo is not None and fifo.head_position > 4096 and fifo._base > 0  # compacted
    assert cache.evictions == expected > 3000
    assert cache.cached_blocks == registered - expected  # taken-back blocks stay cached


def test_an_owner_takes_back_exactly_its_surviving_note() -> None:
    a, cache = _hash_pool(6)
    blocks = a.alloc_many(3)  # 0, 1, 2
    cache.insert_stream(Private(7), blocks, 0, 2)
    a.release(blocks, owner=7, registered=2)  # queued 2, 1, 0: block 0 last
    assert cache.lookup_stream(Private(7), 5) == [0, 1] and cache.cached_blocks == 2
    assert a.alloc_many(4) == [3, 4, 5, 2]  # uncached 2 goes, the note's blocks stay
    for wrong in ([BlockId(0)], [BlockId(1)], [BlockId(1), BlockId(0)]):
        with pytest.raises(InvariantViolation):
            a.revive_many(wrong, owner=7)
    with pytest.raises(InvariantViolation):
        a.revive_many([BlockId(0), BlockId(1)], owner=8)  # somebody else's note
    assert list(cache) == [1, 0]  # refused: nothing changed
    assert a.alloc() == 1 and cache.evictions == 1  # the head passes the note's tail block
    assert cache.lookup_stream(Private(7), 5) == [0]
    a.revive_many([BlockId(0)], owner=7)
    assert cache.lookup_stream(Private(7), 5) == [] and cache.cached_blocks == 1
    assert len(cache) == 0 and cache.evictions == 1


def test_private_blocks_are_never_shared() -> None:
    a, _ = _hash_pool(4)
    blocks = a.alloc_many(2)
    a.incref(blocks[0])
    with pytest.raises(InvariantViolation):
        a.release(blocks, owner=3, registered=1)


class NewestFirstCache:
    """A third eviction policy, only to show the ``PrefixCache`` protocol: uncached free blocks
    first (FIFO), then the most recently freed cached block (the opposite of LRU)."""

    by_owner = False

    def __init__(self, num_blocks: int) -> None:
        self.evictions = 0
        self._uncached = OrderedFreeQueue(range(num_blocks))
        self._cached_free: dict[BlockId, None] = {}  # insertion order: oldest first
        self.block_of: dict[int, BlockId] = {}
        self.key_of: dict[BlockId, int] = {}

    def pop(self) -> BlockId:
        if len(self._uncached):
            return self._uncached.pop()
        block = next(reversed(self._cached_free))
        del self._cached_free[block]
        del self.block_of[self.key_of.pop(block)]
        self.evictions += 1
        return block

    def push(self, block_id: BlockId) -> None:
        if block_id in self.key_of:
            self._cached_free[block_id] = None
        else:
            self._uncached.push(block_id)

    def pop_many(self, n: int) -> list[BlockId]:
        return [self.pop() for _ in range(n)]

    def push_many(
        self, block_ids: Sequence[BlockId], owner: int | None = None, registered: int = 0
    ) -> None:
        for block_id in block_ids:
            self.push(block_id)

    def remove(self, block_id: BlockId) -> None:
        if block_id in self.key_of:
            del self._cached_free[block_id]
        else:
            self._uncached.remove(block_id)

    def remove_many(self, block_ids: Sequence[BlockId], owner: int | None = None) -> None:
        for block_id in block_ids:
            self.remove(block_id)

    def __len__(self) -> int:
        return len(self._uncached) + len(self._cached_free)

    def __iter__(self) -> Iterator[BlockId]:
        yield from self._uncached
        yield from self._cached_free

    @property
    def cached_blocks(self) -> int:
        return len(self.block_of)

    def lookup_stream(self, keys: BlockKeys, limit: int) -> list[BlockId]:
        hits: list[BlockId] = []
        for key in keys.extend(limit)[:limit]:
            block = self.block_of.get(key)
            if block is None:
                break
            hits.append(block)
        return hits

    def insert_stream(
        self, keys: BlockKeys, blocks: Sequence[BlockId], start: int, stop: int
    ) -> None:
        key_list = keys.extend(stop)
        for j in range(start, stop):
            if key_list[j] not in self.block_of and blocks[j] not in self.key_of:
                self.block_of[key_list[j]] = blocks[j]
                self.key_of[blocks[j]] = key_list[j]

    def owned_filled(self, n: int) -> None:
        raise AssertionError("never called: by_owner is False")


def test_a_new_policy_implements_the_protocol() -> None:
    cache: PrefixCache = NewestFirstCache(5)  # type-checks against the protocol
    a = BlockAllocator(5, 4, free_queue=cache)
    first, second = a.alloc_many(2), a.alloc_many(2)  # 0, 1 | 2, 3
    cache.insert_stream(Private(1), first, 0, 2)
    cache.insert_stream(Private(2), second, 0, 1)
    a.release(first)
    a.release(second)
    assert list(cache) == [4, 3, 1, 0, 2] and cache.cached_blocks == 3
    assert a.alloc_many(3) == [4, 3, 2]  # uncached ones first, then the newest cached (2)
    assert cache.evictions == 1 and cache.lookup_stream(Private(2), 1) == []
    assert cache.lookup_stream(Private(1), 2) == [0, 1]
    a.revive_many(cache.lookup_stream(Private(1), 2))
    assert len(cache) == 0 and cache.cached_blocks == 2
    a.check()


def test_the_kv_core_imports_nothing_of_the_workload_or_the_engine() -> None:
    kv = Path(simkv.kv.__file__).parent
    for path in kv.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [alias.name for alias in node.names]
                )
                for name in names:
                    assert not name.startswith(("simkv.workload", "simkv.engine")), path
