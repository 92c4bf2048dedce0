"""The prefix-cache side of the paged KV memory: a part of
:class:`~simkv.engine.memory.paged.PagedKV`, which a scheduler calls as ``kv.prefix``.

Admission onto a cached prefix (vLLM 0.11's ``KVCacheManager.get_computed_blocks`` and
``allocate_slots``: at most ``num_tokens - 1`` tokens hit, whole blocks; reviving a free cached
block uses up a free block) and the registration of full blocks under their content keys
(when, is :mod:`simkv.engine.memory.paged`'s module docstring). The admission itself is
``PagedKV.allocate_with_prefix``: the hits (:meth:`PrefixPart.take_hits`), then the growth.
"""

from __future__ import annotations

from collections.abc import Sequence

from simkv.engine.memory.sums import KVSums
from simkv.engine.request.seq import Seq, Status
from simkv.kv.allocator import BlockAllocator, BlockId, InvariantViolation
from simkv.kv.prefix_cache import PrefixCache


class PrefixPart:
    """Lookups in and registrations with ``cache`` (None: no prefix caching; every lookup
    misses, nothing registers) for the blocks of ``gpu``, keeping ``sums`` exact for hits."""

    __slots__ = ("_refs", "block_size", "cache", "gpu", "sums")

    def __init__(self, gpu: BlockAllocator, cache: PrefixCache | None, sums: KVSums) -> None:
        self.gpu = gpu
        self.cache = cache
        self.block_size = gpu.block_size
        self.sums = sums
        self._refs: Sequence[int] = gpu.refcounts

    def cached_prefix(self, seq: Seq) -> list[BlockId]:
        """Blocks of the longest cached prefix of a request with nothing computed (vLLM's
        ``get_computed_blocks``): whole blocks, at most ``num_tokens - 1`` tokens."""
        if self.cache is None or seq.keys is None:
            return []
        limit = (seq.num_tokens - 1) // self.block_size
        return self.cache.lookup_stream(seq.keys, limit)

    def cannot_hit(self, seq: Seq) -> bool:
        """Whether :meth:`cached_prefix` finds nothing for ``seq`` until it runs: no cache, no
        keys, or private keys (only it can hit them) and it never held blocks."""
        keys = self.cache is not None and seq.keys
        return not keys or (keys.owner is not None and not seq.preemptions and not seq.swaps)

    def blocks_taken(self, hits: list[BlockId], num_tokens: int) -> int:
        """Free blocks that holding ``num_tokens`` tokens on the cached ``hits`` uses up: the
        blocks beyond the hits, plus each hit revived from the free queue (as in vLLM)."""
        refs = self._refs
        revived = sum(1 for block in hits if refs[block] == 0)
        return -(-num_tokens // self.block_size) - len(hits) + revived

    def fits_whole(self, seq: Seq, hits: list[BlockId] | None) -> bool:
        """Whether blocks for all of ``seq``'s tokens are free beyond its cached ``hits``
        (None: beyond the blocks it holds), the check vLLM's ``KVCacheManager.allocate_slots``
        makes with ``full_sequence_must_fit``."""
        if hits is None:
            held = len(seq.table.block_ids)
            return -(-seq.num_tokens // self.block_size) - held <= self.gpu.free_blocks
        return self.blocks_taken(hits, seq.num_tokens) <= self.gpu.free_blocks

    def take_hits(self, seq: Seq, hits: list[BlockId]) -> None:
        """Make the cached ``hits`` (non-empty, :meth:`blocks_taken` checked free) the start of
        a waiting ``seq``'s table: its first ``len(hits)`` blocks, computed."""
        refs, bs, gpu, keys = self._refs, self.block_size, self.gpu, seq.keys
        if keys is None:
            raise InvariantViolation(f"cache hits for {seq} without keys")
        if keys.owner is not None:  # private keys: its own free blocks, taken back at once
            gpu.revive_many(hits, keys.owner)
        else:
            shared = 0
            for block in hits:
                if refs[block] == 0:
                    gpu.revive(block)
                else:
                    gpu.incref(block)
                    shared += bs
            if shared:
                self.sums.shared(shared)
        cached = len(hits) * bs
        table = seq.table
        table.block_ids = list(hits)
        table.length = cached
        seq.num_computed = cached
        seq.cached_upto = len(hits)
        self.sums.computed(cached)

    def cache_computed(self, seqs: list[Seq]) -> None:
        """Register the blocks the last step filled (full and computed) in the prefix cache."""
        if self.cache is None:
            return
        bs = self.block_size
        for seq in seqs:
            if seq.status is Status.RUNNING and seq.num_computed // bs > seq.cached_upto:
                self.register(seq, seq.num_computed)

    def register(self, seq: Seq, tokens: int) -> None:
        """Register ``seq``'s blocks full up to its first ``tokens`` tokens."""
        cache, full = self.cache, tokens // self.block_size
        if cache is None or seq.keys is None or full <= seq.cached_upto:
            return
        cache.insert_stream(seq.keys, seq.table.block_ids, seq.cached_upto, full)
        seq.cached_upto = full
