"""The paged KV memory as the paged schedulers see it: GPU block pool, CPU swap pool, waste sums.

:class:`PagedKV` owns a :class:`~simkv.kv.allocator.BlockAllocator` (GPU) and an optional
:class:`~simkv.kv.swap.SwapPool` (CPU). It keeps two running sums so a step's waste split costs
O(1): ``written_tokens`` (Σ computed tokens of GPU-resident requests) minus ``shared_tokens``
(tokens of blocks shared by several requests, counted once per extra reference) are the token
states, and ``internal_slots`` (Σ over GPU-resident requests of slots in their blocks beyond their
final length: slots that will never be written). Everything else held is reservation. Forked
multi-sequence requests (:mod:`simkv.engine.groups`) add each sequence's computed tokens to
``written_tokens`` and the tokens their sequences share to ``fork_dup_tokens`` (once per extra
reference), so token states count a shared block once.

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
once); GPU refcounts equal the
references from every GPU-resident table (every table of every resident group), CPU refcounts
those from swapped-out tables; ``written_tokens``, ``internal_slots``, ``shared_tokens`` and
``fork_dup_tokens`` equal their definitions recomputed from the resident requests.
"""

from __future__ import annotations

from collections.abc import Iterable

from simkv.engine import groups
from simkv.engine.paged_prefix import PrefixSide
from simkv.engine.paged_swap import SwapSide
from simkv.engine.plan import StepPlan
from simkv.engine.sequence import Seq
from simkv.kv.allocator import BlockAllocator, BlockId, InvariantViolation, ReuseOrder
from simkv.kv.block_table import SequenceTable
from simkv.kv.hash_cache import HashPrefixCache
from simkv.kv.prefix_cache import PrefixCache
from simkv.kv.radix_cache import RadixPrefixCache
from simkv.kv.swap import AllocStatus, SwapPool
from simkv.kv.waste import WasteBreakdown, unwritten_slots

PrefixCaching = str  # "none" | "hash" | "radix"


class PagedKV(SwapSide, PrefixSide):
    """GPU blocks + CPU swap pool + running waste sums for one simulation run."""

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
        self.gpu = BlockAllocator(num_blocks, block_size, reuse=reuse, free_queue=self.cache)
        self._refs = self.gpu.refcounts
        self.refcounts = self._refs  # read-only view for the schedulers' hot paths
        self.shared_tokens = 0
        self.block_size = block_size
        self.block_bytes = block_bytes
        self.swap = SwapPool(swap_blocks, block_size, block_bytes) if swap_blocks > 0 else None
        self.written_tokens = 0
        self.internal_slots = 0
        self.fork_dup_tokens = 0
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

    def _internal(self, seq: Seq) -> int:
        return unwritten_slots(len(seq.table.block_ids), self.block_size, seq.final_kv_tokens)

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
            # groups.decode_slots; a prefix cache shares full blocks only
            raise InvariantViolation(f"{seq} would write into a shared partial block")
        grow = -(-(length + num_new) // bs) - len(ids)  # new blocks (SequenceTable's count)
        if grow > gpu.free_blocks:
            return False
        if grow > 0:
            final, before = seq.final_kv_tokens, len(ids)
            ids.extend(gpu.alloc_many(grow))
            if len(ids) * bs > final:  # (else no slot of these blocks stays unwritten)
                self.internal_slots += unwritten_slots(len(ids), bs, final) - unwritten_slots(
                    before, bs, final
                )
        table.length = length = length + num_new
        if self.cache_on_alloc:
            keys = seq.keys
            if keys is not None and keys.owner is None and length // bs > seq.cached_upto:
                self._register(seq, length)
        return True

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
        self.internal_slots += final_internal
        return last

    def commit(self, plan: StepPlan) -> None:
        """The step's scheduled tokens are computed: their KV is now written.

        Called before the scheduler advances each request's ``num_computed``.
        """
        self.written_tokens += plan.prefill_tokens + plan.decode_tokens

    def free(self, seq: Seq) -> None:
        """Release every GPU block of ``seq`` (finish, abort, or recompute preemption).

        Blocks are freed last block first, so a cache evicts a request's tail before its head.
        """
        if seq.group is not None and seq.group.tables:
            groups.free_group(self, seq)
            return
        self.written_tokens -= seq.num_computed
        self.internal_slots -= self._internal(seq)
        table, keys = seq.table, seq.keys
        if self.cache is not None and keys is not None:
            # the cache notes a private owner's blocks as they are freed; with caching at
            # allocation, a victim scheduled earlier in this step has its new blocks cached
            self._register(seq, table.length if self.cache_on_alloc else seq.num_computed)
            shared = self.gpu.release(table.block_ids, keys.owner, seq.cached_upto)
        else:
            shared = self.gpu.release(table.block_ids)
        self.shared_tokens -= shared * self.block_size
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

    def breakdown(self) -> WasteBreakdown:
        """The GPU pool's slots split as token states / reservation / internal / free."""
        return WasteBreakdown(*self.slots())

    def memory_row(self) -> tuple[int, ...]:
        """What a step row records of the memory, in the recorder's ``STEP_MEMORY_COLUMNS``
        order: GPU blocks used and free, :meth:`slots`, CPU blocks used, cached blocks,
        slots saved by sharing, evictions so far."""
        gpu, cache, swap = self.gpu, self.cache, self.swap
        return (
            gpu.used_blocks - self.null_blocks, gpu.free_blocks, *self.slots(),
            0 if swap is None else swap.used_blocks,
            0 if cache is None else cache.cached_blocks, self.shared_tokens,
            0 if cache is None else cache.evictions,
        )  # fmt: skip

    def slots(self) -> tuple[int, int, int, int, int]:
        """:meth:`breakdown`'s five counts, unchecked (the per-step recording path)."""
        bs, gpu, internal = self.block_size, self.gpu, self.internal_slots
        tokens = self.written_tokens - self.shared_tokens - self.fork_dup_tokens
        used = (gpu.used_blocks - self.null_blocks) * bs
        return tokens, used - tokens - internal, internal, 0, gpu.free_blocks * bs

    def check(self, gpu_seqs: Iterable[Seq], cpu_seqs: Iterable[Seq] = ()) -> None:
        """Raise ``InvariantViolation`` unless every invariant of the module docstring holds (tests
        call this after every step)."""
        gpu_seqs = list(gpu_seqs)
        tables = [t for s in gpu_seqs for t in groups.tables_of(s)]
        if self.null_blocks:  # the null block's one reference, as a one-block table
            tables.append(SequenceTable(self.block_size, [BlockId(0)], self.block_size))
        self.gpu.check(tables)
        if self.swap is not None:
            self.swap.cpu.check([t for s in cpu_seqs for t in groups.tables_of(s)])
        bs, written, internal, dup = self.block_size, 0, 0, 0
        for s in gpu_seqs:
            w, i, d = groups.group_sums(groups.tables_of(s), s.num_computed, s.final_kv_tokens, bs)
            written, internal, dup = written + w, internal + i, dup + d
        refs = self._refs
        single = {b for s in gpu_seqs if not groups.is_forked(s) for b in s.table.block_ids}
        shared = sum(refs[b] - 1 for b in single)
        for name, actual, kept in (
            ("written_tokens", written, self.written_tokens),
            ("internal_slots", internal, self.internal_slots),
            ("fork_dup_tokens", dup, self.fork_dup_tokens),
            ("shared_tokens", shared * self.block_size, self.shared_tokens),
        ):
            if actual != kept:
                raise InvariantViolation(f"PagedKV.{name} is {kept}, recomputed {actual}")
