"""The paged KV memory as the paged schedulers see it: GPU block pool and its parts.

:class:`PagedKV` owns a :class:`~simkv.kv.allocator.BlockAllocator` (GPU) and, as components,
its parts: ``sums`` (:class:`~simkv.engine.memory.sums.KVSums`, the running sums that make a
step's waste split O(1)), ``forks`` (:class:`~simkv.engine.memory.forks.ForkPart`, forked
multi-sequence requests), ``swap`` (:class:`~simkv.engine.memory.swap.SwapPart`, the CPU swap
pool) and ``prefix`` (:class:`~simkv.engine.memory.prefix.PrefixPart`, prefix-cache lookups and
registration). A scheduler calls whole-request operations on the memory itself
(``allocate_slots``, ``free``, ``commit`` …) and the parts' operations on the parts
(``kv.swap.swap_out(seq)``, ``kv.prefix.cached_prefix(seq)``, ``kv.forks.fork(seq)``): one call,
no delegation on the hot paths. No part knows the memory; each gets the allocator, the sums and
the sibling part it needs when the memory builds it.

With prefix caching (``"hash"``: vLLM 0.11; ``"radix"``: SGLang-style; see
:mod:`simkv.kv.prefix_cache`) the cache is the allocator's free queue, and an admission starts
from the longest cached prefix (at most ``num_tokens - 1`` tokens, whole blocks). Full blocks
are registered under their content keys: with ``"hash"``, when they are allocated, as vLLM
0.11's ``KVCacheManager.allocate_slots`` calls ``cache_blocks`` for every block the scheduled
tokens fill (so two requests with the same prompt admitted in one step share its blocks in
that step); a decode that fills its own partial block, and a request with private keys (which
no other request can hit), register after the step, which nobody can tell apart; a freed
request registers what was scheduled. With ``"radix"``, after each step, once computed.

The null block (``null_block=True``, vLLM V1): block 0 is taken at construction and never
freed, as vLLM 0.11's ``BlockPool`` reserves it; the usable pool is ``num_blocks - 1`` blocks
and the step rows' used blocks and waste slots leave it out (``BlockPool.get_usage`` divides
by ``num_gpu_blocks - 1``).

Invariants (checked by :meth:`check`): the allocator's own invariants (the null block held
once); GPU refcounts equal the references from every GPU-resident table (every table of every
resident group), CPU refcounts those from swapped-out tables; the running sums
(``written_tokens``, ``internal_slots``, ``shared_tokens``, ``fork_dup_tokens``) equal their
definitions recomputed from the resident requests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from simkv.engine.memory.forks import ForkPart, group_sums, single_internal
from simkv.engine.memory.prefix import PrefixPart
from simkv.engine.memory.sums import KVSums
from simkv.engine.memory.swap import SwapPart
from simkv.engine.request.plan import StepPlan
from simkv.engine.request.seq import Seq, is_forked, tables_of
from simkv.kv.allocator import BlockAllocator, BlockId, InvariantViolation, ReuseOrder
from simkv.kv.block_table import SequenceTable
from simkv.kv.hash_cache import HashPrefixCache
from simkv.kv.prefix_cache import PrefixCache
from simkv.kv.radix_cache import RadixPrefixCache
from simkv.kv.swap import AllocStatus, SwapPool
from simkv.kv.waste import WasteBreakdown, unwritten_slots

PrefixCaching = str  # "none" | "hash" | "radix"


class PagedKV:
    """GPU blocks and their parts (swap, prefix, forks, sums) for one simulation run."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        *,
        reuse: ReuseOrder | str = ReuseOrder.FIFO,
        swap_blocks: int = 0,
        block_bytes: int = 0,
        prefix_caching: PrefixCaching = "none",
        cache: PrefixCache | None = None,
        null_block: bool = False,
    ) -> None:
        """``cache``: a prefix cache (eviction policy) to use instead of a named one;
        ``null_block``: reserve block 0 (see the module docstring)."""
        if cache is None and prefix_caching == "hash":
            cache = HashPrefixCache(num_blocks, reuse)
        elif cache is None and prefix_caching == "radix":
            cache = RadixPrefixCache(num_blocks)
        self.cache: PrefixCache | None = cache
        # vLLM 0.11's hash cache registers blocks when they are allocated (module docstring)
        self.cache_on_alloc = cache is not None and prefix_caching == "hash"
        self.register_on_free = True  # (async scheduling registers by itself)
        self.gpu = BlockAllocator(num_blocks, block_size, reuse=reuse, free_queue=self.cache)
        self._refs = self.gpu.refcounts
        self.refcounts = self._refs  # read-only view for the schedulers' hot paths
        self.block_size = block_size
        self.block_bytes = block_bytes
        self.sums = KVSums()
        self.forks = ForkPart(self.gpu, block_size, self.sums)
        pool = SwapPool(swap_blocks, block_size, block_bytes) if swap_blocks > 0 else None
        self.swap = SwapPart(self.gpu, pool, self.sums, self.forks)
        self.prefix = PrefixPart(self.gpu, cache, self.sums)
        self.null_blocks = 0
        if null_block:
            self._reserve_null_block()

    def _reserve_null_block(self) -> None:
        """Take block 0 for good: vLLM 0.11's ``BlockPool.__init__`` pops it off the head of
        the free queue as the null block (a placeholder in block tables, never freed)."""
        if self.gpu.num_blocks < 2:
            raise InvariantViolation("a pool with a null block needs at least two blocks")
        block = self.gpu.alloc()
        if block != 0:
            raise InvariantViolation(f"the null block is block {block}, not 0")
        self.null_blocks = 1

    def blocks_to_allocate(self, seq: Seq, num_new: int) -> int:
        """New GPU blocks that scheduling ``num_new`` more tokens of ``seq`` needs."""
        return seq.table.blocks_needed(num_new, self.gpu)

    def decode_fits_in_place(self, seq: Seq) -> bool:
        """If the next token fits in ``seq``'s own partial trailing block, take the slot.

        The per-step hot path of every decode: no allocation, no copy-on-write needed.
        """
        table = seq.table
        if table.length % self.block_size and self._refs[table.block_ids[-1]] == 1:
            table.length += 1
            return True
        return False

    def allocate_slots(self, seq: Seq, num_new: int) -> bool:
        """Make room for ``num_new`` more tokens of ``seq``; False (nothing changed) if short.

        Follows vLLM 0.11's ``KVCacheManager.allocate_slots``: all or nothing, no watermark.
        """
        table, bs, gpu = seq.table, self.block_size, self.gpu
        ids, length = table.block_ids, table.length
        if length % bs and self._refs[ids[-1]] > 1:
            # only forked groups share a partial block, and they take slots through
            # ForkPart.decode_slots; a prefix cache shares full blocks only
            raise InvariantViolation(f"{seq} would write into a shared partial block")
        grow = -(-(length + num_new) // bs) - len(ids)  # new blocks (SequenceTable's count)
        if grow > gpu.free_blocks:
            return False
        if grow > 0:
            final, before = seq.final_kv_tokens, len(ids)
            ids.extend(gpu.alloc_many(grow))
            if len(ids) * bs > final:  # (else no slot of these blocks stays unwritten)
                self.sums.grew(
                    unwritten_slots(len(ids), bs, final) - unwritten_slots(before, bs, final)
                )
        table.length = length = length + num_new
        if self.cache_on_alloc:
            keys = seq.keys
            if keys is not None and keys.owner is None and length // bs > seq.cached_upto:
                self.prefix.register(seq, length)
        return True

    def allocate_with_prefix(self, seq: Seq, hits: list[BlockId] | None, num_new: int) -> bool:
        """Admit ``seq`` onto its cached ``hits`` (``prefix.cached_prefix``; None: onto the
        blocks it holds) plus room for ``num_new`` more tokens; False (nothing changed) if
        short.

        All or nothing: reviving a free cached block uses up a free block, as in vLLM.
        """
        if hits is None:  # blocks reserved for all its tokens (a KV load): the slots it runs
            seq.table.length = seq.num_computed
        if not hits:
            return self.allocate_slots(seq, num_new)
        prefix = self.prefix
        if prefix.blocks_taken(hits, len(hits) * self.block_size + num_new) > self.gpu.free_blocks:
            return False
        prefix.take_hits(seq, hits)
        # the hits are full blocks, none past the final length: the one growth path from here
        if not self.allocate_slots(seq, num_new):
            raise InvariantViolation(f"{seq}: blocks counted free for its admission were not")
        return True

    def reserve_remote(self, seq: Seq, hits: list[BlockId], tokens: int | None = None) -> bool:
        """Blocks for a waiting ``seq``'s first ``tokens`` tokens (None: all), its cached
        ``hits`` first, whose KV another replica or a KV tier will send (:meth:`receive`);
        False (nothing changed) if short. The blocks are registered with the prefix cache
        only once received (vLLM 0.11's ``allocate_slots`` with ``delay_cache_blocks`` for an
        asynchronous KV load)."""
        tokens = seq.num_tokens if tokens is None else tokens
        on, self.cache_on_alloc = self.cache_on_alloc, False
        try:
            fits = self.allocate_with_prefix(seq, hits, tokens - len(hits) * self.block_size)
        finally:
            self.cache_on_alloc = on
        return fits  # (table.length counts the reserved slots until the request runs)

    def receive(self, seq: Seq, computed: int | None = None) -> None:
        """The KV of a reserved ``seq`` (:meth:`reserve_remote`) arrived: its first
        ``computed`` tokens are computed (None: every token but the last, as vLLM's
        ``Scheduler._update_waiting_for_remote_kv`` leaves a full prompt to recompute its
        last token); its full blocks join the prefix cache."""
        computed = seq.num_tokens - 1 if computed is None else computed
        self.sums.computed(computed - seq.num_computed)
        seq.num_computed = computed
        self.prefix.register(seq, computed)

    def reserve_return(self, seq: Seq, tokens: int) -> int | None:
        """Blocks on this (prefill) replica for the first ``tokens // block_size`` full blocks
        of ``seq``'s key stream (a request with nothing computed here), its cached prefix first:
        the tokens beyond that prefix another replica will send (:meth:`land_return`; 0 when
        the prefix covers them and nothing is reserved), None when the blocks are short (nothing
        changed). Like :meth:`reserve_remote`, the blocks join the cache only once landed."""
        keys, full, bs = seq.keys, tokens // self.block_size, self.block_size
        if self.cache is None or keys is None or keys.owner is not None:
            return 0  # (private keys: only this request could hit them; it will not come back)
        hits = self.cache.lookup_stream(keys, full)
        if len(hits) >= full:
            return 0
        seq.final_kv_tokens = full * bs
        on, self.cache_on_alloc = self.cache_on_alloc, False
        try:
            fits = self.allocate_with_prefix(seq, hits, (full - len(hits)) * bs)
        finally:
            self.cache_on_alloc = on
        return (full - len(hits)) * bs if fits else None

    def land_return(self, seq: Seq) -> None:
        """The KV reserved by :meth:`reserve_return` arrived: its blocks are computed, join
        the prefix cache, and are freed (cached, evictable, as a finished request's)."""
        computed = seq.table.length
        self.sums.computed(computed - seq.num_computed)
        seq.num_computed = computed
        self.prefix.register(seq, computed)
        self.free(seq)

    def grow_decodes(self, seqs: list[Seq], blocks: list[BlockId]) -> bool:
        """Append one just-allocated block to each of ``seqs`` (in order): decodes whose
        tables are full up to a block boundary (decode-lane members: their ``table.length``
        is not up to date, so it stays as it is). Returns whether the block is the last one
        any of them needs (their final length fits: ``over >= 0`` below)."""
        bs, final_internal, last = self.block_size, 0, False
        for seq, block in zip(seqs, blocks, strict=True):
            ids = seq.table.block_ids
            ids.append(block)
            # unwritten_slots(n) - unwritten_slots(n - 1) for n blocks, inline (hot path): the
            # new block adds min(over, bs) slots past the final length when over > 0
            over = len(ids) * bs - seq.final_kv_tokens
            if over >= 0:
                last = True
                final_internal += over if over < bs else bs
        if final_internal:  # (most steps add none: no call on the per-step path)
            self.sums.grew(final_internal)
        return last

    def commit(self, plan: StepPlan) -> None:
        """The step's scheduled tokens are computed: their KV is now written.

        Called before the scheduler advances each request's ``num_computed``.
        """
        self.sums.computed(plan.prefill_tokens + plan.decode_tokens)

    def free(self, seq: Seq) -> None:
        """Release every GPU block of ``seq`` (finish, abort, or recompute preemption).

        Blocks are freed last block first, so a cache evicts a request's tail before its head.
        """
        if seq.group is not None and seq.group.tables:
            self.forks.free_group(seq)
            return
        self.sums.resident(-1, seq.num_computed, single_internal(seq, self.block_size))
        table, keys = seq.table, seq.keys
        if self.cache is not None and keys is not None:
            # the cache notes a private owner's blocks as they are freed; with caching at
            # allocation, a victim scheduled earlier in this step has its new blocks cached
            if self.register_on_free:
                self.prefix.register(seq, table.length if self.cache_on_alloc else seq.num_computed)
            shared = self.gpu.release(table.block_ids, keys.owner, seq.cached_upto)
        else:
            shared = self.gpu.release(table.block_ids)
        if shared:
            self.sums.shared(-shared * self.block_size)
        table.block_ids = []
        table.length = 0
        seq.cached_upto = 0

    def can_allocate(self, seq: Seq, watermark_blocks: int) -> AllocStatus:
        """vLLM v0 admission of a waiting request's whole prompt, keeping a watermark free."""
        required = -(-seq.num_tokens // self.block_size)
        if self.gpu.num_blocks - required < watermark_blocks:
            return AllocStatus.NEVER
        if self.gpu.free_blocks - required < watermark_blocks:
            return AllocStatus.LATER
        return AllocStatus.OK

    def cached_prefix_tokens(self, probe: Callable[[], Seq]) -> int:
        """Tokens of a request's prompt in the prefix cache, whole blocks as admission would
        hit them (0 without a cache); ``probe`` builds the request (never admitted), called
        only when there is a cache."""
        if self.cache is None:
            return 0
        seq = probe()
        return len(self.prefix.cached_prefix(seq)) * self.block_size if seq.keys else 0

    def breakdown(self) -> WasteBreakdown:
        """The GPU pool's slots split as token states / reservation / internal / free."""
        return WasteBreakdown(*self.slots())

    def memory_row(self) -> tuple[int, ...]:
        """What a step row records of the memory, in the recorder's ``STEP_MEMORY_COLUMNS``
        order: GPU blocks used and free, :meth:`slots`, CPU blocks used, cached blocks,
        slots saved by sharing, evictions so far."""
        gpu, cache, pool = self.gpu, self.cache, self.swap.pool
        return (
            gpu.used_blocks - self.null_blocks, gpu.free_blocks, *self.slots(),
            0 if pool is None else pool.used_blocks,
            0 if cache is None else cache.cached_blocks, self.sums.shared_tokens,
            0 if cache is None else cache.evictions,
        )  # fmt: skip

    def slots(self) -> tuple[int, int, int, int, int]:
        """:meth:`breakdown`'s five counts, unchecked (the per-step recording path)."""
        bs, gpu, sums = self.block_size, self.gpu, self.sums
        internal = sums.internal_slots
        tokens = sums.written_tokens - sums.shared_tokens - sums.fork_dup_tokens
        used = (gpu.used_blocks - self.null_blocks) * bs
        return tokens, used - tokens - internal, internal, 0, gpu.free_blocks * bs

    def check(self, gpu_seqs: Iterable[Seq], cpu_seqs: Iterable[Seq] = ()) -> None:
        """Raise ``InvariantViolation`` unless every invariant of the module docstring holds (tests
        call this after every step)."""
        gpu_seqs = list(gpu_seqs)
        tables = [t for s in gpu_seqs for t in tables_of(s)]
        if self.null_blocks:  # the null block's one reference, as a one-block table
            tables.append(SequenceTable(self.block_size, [BlockId(0)], self.block_size))
        self.gpu.check(tables)
        if self.swap.pool is not None:
            self.swap.pool.cpu.check([t for s in cpu_seqs for t in tables_of(s)])
        bs, written, internal, dup = self.block_size, 0, 0, 0
        for s in gpu_seqs:
            w, i, d = group_sums(tables_of(s), s.num_computed, s.final_kv_tokens, bs)
            written, internal, dup = written + w, internal + i, dup + d
        refs = self._refs
        single = {b for s in gpu_seqs if not is_forked(s) for b in s.table.block_ids}
        shared = sum(refs[b] - 1 for b in single)
        self.sums.check(written, internal, dup, shared * bs)
