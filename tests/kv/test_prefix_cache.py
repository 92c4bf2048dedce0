"""Eviction order and hit rules of the prefix caches, on hand-computed scenarios."""

from __future__ import annotations

from simkv.kv.allocator import BlockAllocator, BlockId
from simkv.kv.prefix_cache import HashPrefixCache, RadixPrefixCache

K0, K1, K2, K3 = 100, 101, 102, 103


def _hash_pool(n: int) -> tuple[BlockAllocator, HashPrefixCache]:
    cache = HashPrefixCache(n)
    return BlockAllocator(n, 4, free_queue=cache), cache


def test_hash_lookup_stops_at_first_miss() -> None:
    a, cache = _hash_pool(4)
    blocks = a.alloc_many(3)  # 0, 1, 2
    for key, parent, block in zip((K0, K1, K2), (None, K0, K1), blocks, strict=True):
        assert cache.insert(key, parent, block)
    assert cache.lookup([K0, K1, K2]) == [0, 1, 2]
    assert cache.lookup([K0, K3, K2]) == [0]
    assert cache.lookup([K3, K0]) == []
    assert not cache.insert(K0, None, BlockId(3))  # first one wins


def test_hash_evicts_lazily_in_free_queue_order_tail_first() -> None:
    a, cache = _hash_pool(4)
    blocks = a.alloc_many(3)
    for key, parent, block in zip((K0, K1, K2), (None, K0, K1), blocks, strict=True):
        cache.insert(key, parent, block)
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
