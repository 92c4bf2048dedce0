"""The CPU swap side of the paged KV memory (vLLM v0's swap-out / swap-in): a part of
:class:`~simkv.engine.memory.paged.PagedKV`, which a scheduler calls as ``kv.swap``.

Follows vLLM 0.6's ``BlockSpaceManagerV2.can_swap_out`` / ``can_swap_in`` and
``swap_out`` / ``swap_in``: whole requests move between the GPU block pool and the CPU pool,
sharing kept (a forked group moves as one swap group, :mod:`simkv.engine.memory.forks`).
"""

from __future__ import annotations

from simkv.engine.memory.forks import ForkPart, decode_blocks_needed, single_internal
from simkv.engine.memory.sums import KVSums
from simkv.engine.request.seq import Seq, tables_of
from simkv.kv.allocator import BlockAllocator, InvariantViolation
from simkv.kv.swap import AllocStatus, SwapPool


class SwapPart:
    """Swap-out and swap-in of whole requests between ``gpu`` and the CPU ``pool`` (None: the
    run has no swap space, and every swap-out is refused), keeping ``sums`` exact: a request's
    KV counts while it is on the GPU (a forked group's through ``forks``)."""

    __slots__ = ("block_size", "forks", "gpu", "pool", "sums")

    def __init__(
        self, gpu: BlockAllocator, pool: SwapPool | None, sums: KVSums, forks: ForkPart
    ) -> None:
        self.gpu = gpu
        self.pool = pool
        self.block_size = gpu.block_size
        self.sums = sums
        self.forks = forks

    def can_swap_out(self, seq: Seq) -> AllocStatus:
        """vLLM 0.6.3 ``BlockSpaceManagerV2.can_swap_out`` (``_can_swap`` on the CPU, no
        watermark): the CPU pool must have the distinct *full* blocks of ``seq``'s tables free,
        plus one block per sequence for the token it has not written yet
        (``BlockTable.get_num_blocks_touched_by_append_slots``: 1). NEVER beyond the pool's
        size (and when there is no pool), LATER beyond its free blocks.

        The move takes only the distinct blocks, so a sequence whose trailing block is full
        needs one CPU block more than it moves. Called before the step's slots are taken
        (``table.length`` is the request's computed tokens)."""
        if self.pool is None:
            return AllocStatus.NEVER
        tables, bs = tables_of(seq), self.block_size
        if len(tables) == 1:
            full = tables[0].length // bs
        else:  # a block shared by a group counts once (the sharing moves with it)
            full = len({b for table in tables for b in table.block_ids[: table.length // bs]})
        return self.pool.can_take(full + len(tables))

    def swap_out(self, seq: Seq) -> int:
        """Move ``seq``'s blocks to the CPU pool; returns the number of blocks moved."""
        pool = self.swap_pool()
        if seq.group is not None and seq.group.tables:  # one swap group, sharing kept
            self.forks.account(seq, -1)
            return pool.swap_out(seq.group.tables, self.gpu).num_blocks
        self.sums.resident(-1, seq.num_computed, single_internal(seq, self.block_size))
        return pool.swap_out([seq.table], self.gpu).num_blocks

    def can_swap_in(self, seq: Seq, watermark_blocks: int) -> AllocStatus:
        """vLLM v0 ``can_swap_in``: NEVER if larger than the pool, LATER below the watermark.

        Counts the block the next decode token will touch, so a swapped-in request can decode.
        """
        table = seq.table
        if seq.group is not None and seq.group.tables:
            tables = seq.group.tables
            distinct = len({b for t in tables for b in t.block_ids})
            required = distinct + decode_blocks_needed(tables, self.block_size)
        else:
            required = len(table.block_ids) + (1 if table.length % self.block_size == 0 else 0)
        if self.gpu.num_blocks < required:
            return AllocStatus.NEVER
        if self.gpu.free_blocks - required < watermark_blocks:
            return AllocStatus.LATER
        return AllocStatus.OK

    def swap_in(self, seq: Seq) -> int:
        """Bring ``seq``'s blocks back from the CPU pool; returns the number of blocks moved."""
        pool = self.swap_pool()
        if seq.group is not None and seq.group.tables:
            moved = pool.swap_in(seq.group.tables, self.gpu).num_blocks
            self.forks.account(seq, +1)
            return moved
        moved = pool.swap_in([seq.table], self.gpu).num_blocks
        self.sums.resident(+1, seq.num_computed, single_internal(seq, self.block_size))
        return moved

    def free_swapped(self, seq: Seq) -> None:
        """Release the CPU blocks of a swapped-out request (it is dropped while swapped out)."""
        cpu = self.swap_pool().cpu
        for table in tables_of(seq):
            table.free(cpu)
        if seq.group is not None:
            seq.group.tables = []

    def swap_pool(self) -> SwapPool:
        """The CPU swap pool; :class:`InvariantViolation` when the run has none (a scheduler
        must ask :meth:`can_swap_out` first)."""
        if self.pool is None:
            raise InvariantViolation("a swap without a CPU swap pool (kv_cache.swap_space_gib)")
        return self.pool

    @property
    def cpu_blocks_used(self) -> int:
        """CPU blocks holding swapped-out KV (0 without a pool)."""
        return self.pool.used_blocks if self.pool is not None else 0
