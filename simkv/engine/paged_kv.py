"""The paged KV memory as the paged schedulers see it: GPU block pool, CPU swap pool, waste sums.

:class:`PagedKV` owns a :class:`~simkv.kv.allocator.BlockAllocator` (GPU) and an optional
:class:`~simkv.kv.swap.SwapPool` (CPU). It keeps two running sums so a step's waste split costs
O(1): ``written_tokens`` (Σ computed tokens of GPU-resident requests: token states) and
``internal_slots`` (Σ over GPU-resident requests of slots in their blocks beyond their final
length: slots that will never be written). Everything else held is reservation.

Invariants (checked by :meth:`check`): the allocator's own invariants; GPU refcounts equal the
references from GPU-resident tables; ``written_tokens`` and ``internal_slots`` equal their
definitions recomputed from the resident requests.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from simkv.engine.plan import StepPlan
from simkv.engine.sequence import Seq
from simkv.kv.allocator import BlockAllocator, ReuseOrder
from simkv.kv.swap import SwapDecision, SwapPool
from simkv.kv.waste import WasteBreakdown


class AllocStatus(StrEnum):
    """Admission answer (vLLM v0's ``AllocStatus``): now, after others free blocks, or never."""

    OK = "ok"
    LATER = "later"
    NEVER = "never"


class PagedKV:
    """GPU blocks + CPU swap pool + running waste sums for one simulation run."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        *,
        reuse: ReuseOrder | str = ReuseOrder.FIFO,
        swap_blocks: int = 0,
        block_bytes: int = 0,
    ) -> None:
        self.gpu = BlockAllocator(num_blocks, block_size, reuse=reuse)
        self._refs = self.gpu.refcounts
        self.block_size = block_size
        self.block_bytes = block_bytes
        self.swap = SwapPool(swap_blocks, block_size, block_bytes) if swap_blocks > 0 else None
        self.written_tokens = 0
        self.internal_slots = 0

    def _internal(self, seq: Seq) -> int:
        return max(0, len(seq.table.block_ids) * self.block_size - seq.final_kv_tokens)

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
        table = seq.table
        if table.blocks_needed(num_new, self.gpu) > self.gpu.free_blocks:
            return False
        before = self._internal(seq)
        table.append_tokens(self.gpu, num_new)
        self.internal_slots += self._internal(seq) - before
        return True

    def commit(self, plan: StepPlan) -> None:
        """The step's scheduled tokens are computed: their KV is now written.

        Called before the scheduler advances each request's ``num_computed``.
        """
        self.written_tokens += plan.prefill_tokens + plan.decode_tokens

    def free(self, seq: Seq) -> None:
        """Release every GPU block of ``seq`` (finish, abort, or recompute preemption)."""
        self.written_tokens -= seq.num_computed
        self.internal_slots -= self._internal(seq)
        seq.table.free(self.gpu)

    def can_allocate(self, seq: Seq, watermark_blocks: int) -> AllocStatus:
        """vLLM v0 admission of a waiting request's whole prompt, keeping a watermark free."""
        required = -(-seq.num_tokens // self.block_size)
        if self.gpu.num_blocks - required < watermark_blocks:
            return AllocStatus.NEVER
        if self.gpu.free_blocks - required < watermark_blocks:
            return AllocStatus.LATER
        return AllocStatus.OK

    def can_swap_out(self, seq: Seq) -> SwapDecision:
        """Whether ``seq``'s blocks fit in the CPU pool (NEVER when there is no pool)."""
        if self.swap is None:
            return SwapDecision.NEVER
        return self.swap.can_swap_out([seq.table])

    def swap_out(self, seq: Seq) -> int:
        """Move ``seq``'s blocks to the CPU pool; returns the number of blocks moved."""
        assert self.swap is not None
        self.written_tokens -= seq.num_computed
        self.internal_slots -= self._internal(seq)
        result = self.swap.swap_out([seq.table], self.gpu)
        return result.num_blocks

    def can_swap_in(self, seq: Seq, watermark_blocks: int) -> AllocStatus:
        """vLLM v0 ``can_swap_in``: NEVER if larger than the pool, LATER below the watermark.

        Counts the block the next decode token will touch, so a swapped-in request can decode.
        """
        table = seq.table
        required = len(table.block_ids) + (1 if table.length % self.block_size == 0 else 0)
        if self.gpu.num_blocks < required:
            return AllocStatus.NEVER
        if self.gpu.free_blocks - required < watermark_blocks:
            return AllocStatus.LATER
        return AllocStatus.OK

    def swap_in(self, seq: Seq) -> int:
        """Bring ``seq``'s blocks back from the CPU pool; returns the number of blocks moved."""
        assert self.swap is not None
        result = self.swap.swap_in([seq.table], self.gpu)
        self.written_tokens += seq.num_computed
        self.internal_slots += self._internal(seq)
        return result.num_blocks

    @property
    def cpu_blocks_used(self) -> int:
        return self.swap.used_blocks if self.swap is not None else 0

    def breakdown(self) -> WasteBreakdown:
        """The GPU pool's slots split as token states / reservation / internal / free."""
        held = self.gpu.used_blocks * self.block_size
        return WasteBreakdown(
            token_slots=self.written_tokens,
            reserved_slots=held - self.written_tokens - self.internal_slots,
            internal_frag_slots=self.internal_slots,
            external_frag_slots=0,
            free_slots=self.gpu.free_blocks * self.block_size,
        )

    def check(self, gpu_seqs: Iterable[Seq], cpu_seqs: Iterable[Seq] = ()) -> None:
        """Assert every invariant of the class docstring (tests call this after every step)."""
        gpu_seqs = list(gpu_seqs)
        self.gpu.check([s.table for s in gpu_seqs])
        if self.swap is not None:
            self.swap.cpu.check([s.table for s in cpu_seqs])
        written = sum(s.num_computed for s in gpu_seqs)
        internal = sum(self._internal(s) for s in gpu_seqs)
        assert written == self.written_tokens, (written, self.written_tokens)
        assert internal == self.internal_slots, (internal, self.internal_slots)
