"""The CPU swap side of the paged KV memory (vLLM v0's swap-out / swap-in), a part of
:class:`~simkv.engine.paged_kv.PagedKV` kept in its own module.

Follows vLLM 0.6's ``BlockSpaceManagerV2.can_swap_out`` / ``can_swap_in`` and
``swap_out`` / ``swap_in``: whole requests move between the GPU block pool and the CPU pool,
sharing kept (a forked group moves as one swap group, :mod:`simkv.engine.groups`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simkv.engine import groups
from simkv.engine.sequence import Seq
from simkv.kv.allocator import BlockAllocator, InvariantViolation
from simkv.kv.swap import AllocStatus, SwapPool

if TYPE_CHECKING:
    from simkv.engine.paged_kv import PagedKV


class SwapSide:
    """The swap calls of :class:`~simkv.engine.paged_kv.PagedKV` (which owns every attribute
    used here: ``swap``, ``gpu``, ``block_size``, the running sums)."""

    swap: SwapPool | None
    gpu: BlockAllocator
    block_size: int
    written_tokens: int
    internal_slots: int

    def _internal(self, seq: Seq) -> int: ...  # PagedKV's

    def can_swap_out(self, seq: Seq) -> AllocStatus:
        """vLLM 0.6.3 ``BlockSpaceManagerV2.can_swap_out`` (``_can_swap`` on the CPU, no
        watermark): the CPU pool must have the distinct *full* blocks of ``seq``'s tables free,
        plus one block per sequence for the token it has not written yet
        (``BlockTable.get_num_blocks_touched_by_append_slots``: 1). NEVER beyond the pool's
        size (and when there is no pool), LATER beyond its free blocks.

        The move takes only the distinct blocks, so a sequence whose trailing block is full
        needs one CPU block more than it moves. Called before the step's slots are taken
        (``table.length`` is the request's computed tokens)."""
        if self.swap is None:
            return AllocStatus.NEVER
        tables, bs = groups.tables_of(seq), self.block_size
        if len(tables) == 1:
            full = tables[0].length // bs
        else:  # a block shared by a group counts once (the sharing moves with it)
            full = len({b for table in tables for b in table.block_ids[: table.length // bs]})
        return self.swap.can_take(full + len(tables))

    def swap_out(self, seq: Seq) -> int:
        """Move ``seq``'s blocks to the CPU pool; returns the number of blocks moved."""
        swap = self.swap_pool()
        if seq.group is not None and seq.group.tables:
            return groups.swap_group_out(self._paged(), seq)
        self.written_tokens -= seq.num_computed
        self.internal_slots -= self._internal(seq)
        result = swap.swap_out([seq.table], self.gpu)
        return result.num_blocks

    def can_swap_in(self, seq: Seq, watermark_blocks: int) -> AllocStatus:
        """vLLM v0 ``can_swap_in``: NEVER if larger than the pool, LATER below the watermark.

        Counts the block the next decode token will touch, so a swapped-in request can decode.
        """
        table = seq.table
        if seq.group is not None and seq.group.tables:
            tables = seq.group.tables
            distinct = len({b for t in tables for b in t.block_ids})
            required = distinct + groups.decode_blocks_needed(tables, self.block_size)
        else:
            required = len(table.block_ids) + (1 if table.length % self.block_size == 0 else 0)
        if self.gpu.num_blocks < required:
            return AllocStatus.NEVER
        if self.gpu.free_blocks - required < watermark_blocks:
            return AllocStatus.LATER
        return AllocStatus.OK

    def swap_in(self, seq: Seq) -> int:
        """Bring ``seq``'s blocks back from the CPU pool; returns the number of blocks moved."""
        swap = self.swap_pool()
        if seq.group is not None and seq.group.tables:
            return groups.swap_group_in(self._paged(), seq)
        result = swap.swap_in([seq.table], self.gpu)
        self.written_tokens += seq.num_computed
        self.internal_slots += self._internal(seq)
        return result.num_blocks

    def free_swapped(self, seq: Seq) -> None:
        """Release the CPU blocks of a swapped-out request (it is dropped while swapped out)."""
        cpu = self.swap_pool().cpu
        for table in groups.tables_of(seq):
            table.free(cpu)
        if seq.group is not None:
            seq.group.tables = []

    def swap_pool(self) -> SwapPool:
        """The CPU swap pool; :class:`InvariantViolation` when the run has none (a scheduler
        must ask :meth:`can_swap_out` first)."""
        if self.swap is None:
            raise InvariantViolation("a swap without a CPU swap pool (kv_cache.swap_space_gib)")
        return self.swap

    @property
    def cpu_blocks_used(self) -> int:
        return self.swap.used_blocks if self.swap is not None else 0

    def _paged(self) -> PagedKV:
        return self  # type: ignore[return-value]
