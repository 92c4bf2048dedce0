"""Prefix caches: content-keyed full blocks that outlive their requests, and their eviction.

A prefix cache is the allocator's free queue (:class:`~simkv.kv.free_queue.FreeQueue`): the
order in which free blocks are reused *is* the eviction order, and a cached block loses its
content only when it is reused (lazy eviction). Content reaches the cache as plain integer keys
(:class:`BlockKeys`: one chained key per full block, equal for two requests exactly when their
prefixes up to that block are equal); only full blocks are cached. Two policies ship:

* :class:`~simkv.kv.hash_cache.HashPrefixCache` (``hash``) follows vLLM 0.11's automatic prefix
  caching: one FIFO free queue of every free block, cached or not; a request's blocks are freed
  tail first, so the least recently used block (and, within a request, its last block) is
  evicted first.
* :class:`~simkv.kv.radix_cache.RadixPrefixCache` (``radix``) follows SGLang's RadixAttention at
  block granularity: blocks without cached content are reused first, then the least recently
  used *leaf* of the tree of cached prefixes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from simkv.kv.free_queue import BlockId, FreeQueue

__all__ = ["BlockKeys", "PrefixCache"]


class BlockKeys(Protocol):
    """One request's content identity as a prefix cache reads it: plain integer block keys.

    ``extend(n)`` returns a sequence whose first ``n`` items are the keys of the request's
    first ``n`` full blocks (key ``j`` stands for the content of blocks ``0 … j``). ``owner`` is
    ``None`` for keys other requests may share; for *private* keys (only one request can ever
    hit them: a workload without content) it is that request's id, a plain int the cache may
    keep that request's blocks under instead of one entry per key.
    (:class:`~simkv.workload.content.KeyStream` and ``UniqueKeys`` implement this.)
    """

    @property
    def owner(self) -> int | None: ...

    def extend(self, num_blocks: int) -> Sequence[int]: ...


class PrefixCache(FreeQueue, Protocol):
    """What :class:`~simkv.engine.memory.paged.PagedKV` needs from a prefix cache.

    The free-queue methods decide the eviction order: ``pop`` hands out the block to reuse next
    and forgets (evicts) its cached content, counting ``evictions``; ``remove`` takes a free
    cached block back on a hit. ``insert_stream`` registers a request's full computed blocks
    ``start … stop - 1`` (``blocks[j]`` holds its block ``j``; ``stop`` only grows, and a block is
    registered at most once per residency); ``lookup_stream`` returns the blocks of the longest
    cached prefix of a request's first ``limit`` block keys, stopping at the first miss.
    ``cached_blocks`` counts blocks holding registered content, free or in use.

    Whole-request calls carry what a cache needs as arguments (nothing is armed for a later
    call): when a request frees its blocks, ``push_many`` gets them last block first with its
    ``owner`` (private keys only) and how many leading blocks it ``registered``; when it takes
    its own cached blocks back, ``remove_many`` gets the lookup's blocks and its ``owner``.

    ``by_owner``: whether the cache keeps requests with private keys by owner (registration
    of their blocks is then a count: ``owned_filled(n)`` may register one more block of each of
    ``n`` such requests without saying which; the cache notes their blocks when they are freed).
    A policy that sets it False never sees ``owned_filled``.

    **Adding an eviction policy**: write a class with these members (a free queue that holds
    every block at first, in the order to reuse them, plus the key map), give it a name in
    ``KvCacheConfig.prefix_caching`` and in ``PagedKV.__init__`` (or pass an instance as
    ``PagedKV(cache=...)``), and test it like ``tests/kv/test_prefix_cache.py``'s
    ``NewestFirstCache``. ``PagedKV.check`` and the allocator's ``check`` hold for any policy.
    """

    by_owner: bool
    evictions: int

    @property
    def cached_blocks(self) -> int: ...

    def lookup_stream(self, keys: BlockKeys, limit: int) -> list[BlockId]: ...

    def insert_stream(
        self, keys: BlockKeys, blocks: Sequence[BlockId], start: int, stop: int
    ) -> None: ...

    def owned_filled(self, n: int) -> None: ...
