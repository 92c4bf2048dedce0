"""Physical KV block pool: a free queue plus reference counts.

This module is the only code that changes refcounts. Block tables (``block_table.py``) and the
swap pool (``swap.py``) call ``alloc``/``incref``/``free`` and never touch the counts directly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Protocol

from simkv.kv.errors import (
    BlockError,
    DoubleFree,
    InvalidBlockId,
    InvariantViolation,
    OutOfBlocks,
)
from simkv.kv.free_queue import (
    BlockId,
    FifoFreeQueue,
    FreeQueue,
    OrderedFreeQueue,
    ReuseOrder,
    make_free_queue,
)


class HeldBlocks(Protocol):
    """A table as :meth:`BlockAllocator.check` reads it (``block_table.SequenceTable``): the
    blocks holding ``length`` tokens of ``block_size`` slots each, one reference per block."""

    block_size: int
    length: int
    block_ids: list[BlockId]


__all__ = [
    "BlockAllocator",
    "BlockError",
    "BlockId",
    "DoubleFree",
    "FifoFreeQueue",
    "FreeQueue",
    "HeldBlocks",
    "InvalidBlockId",
    "InvariantViolation",
    "OrderedFreeQueue",
    "OutOfBlocks",
    "ReuseOrder",
    "make_free_queue",
]


class BlockAllocator:
    """Hands out fixed-size physical KV blocks with reference counting.

    Invariants (verified by ``check``):

    * ``free_blocks + used_blocks == num_blocks``;
    * every block in the free queue has refcount 0 and appears there exactly once;
    * every block not in the free queue has refcount >= 1;
    * given the tables resident on this allocator, each block's refcount equals the number of
      references to it from those tables.

    The free queue's order *is* the reuse policy: ``alloc`` pops the head, ``free`` returns a
    block to the tail (``FIFO``) or the head (``LIFO``) when its refcount reaches 0. The initial
    order is ``0, 1, ..., num_blocks - 1``. ``alloc`` and ``free`` are O(1). A prefix cache
    passes its own cache-aware ``free_queue`` (holding all ``num_blocks`` ids initially).

    ``release`` frees a table's blocks so that its tail is reused first: last block first
    into a FIFO queue or a cache's queue (vLLM 0.11's ``KVCacheManager.free``), first block
    first into the allocator's own LIFO queue (vLLM 0.6.3's ``BlockTable.free`` over
    ``NaiveBlockAllocator``, which frees with ``appendleft`` and allocates with ``popleft``).
    """

    __slots__ = (
        "_block_size", "_free", "_head_first", "_num_blocks", "_refcount", "_reuse", "_used",
    )  # fmt: skip

    def __init__(
        self,
        num_blocks: int,
        block_size: int = 16,
        reuse: ReuseOrder | str = ReuseOrder.FIFO,
        free_queue: FreeQueue | None = None,
    ) -> None:
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self._reuse = ReuseOrder(reuse)
        self._block_size = block_size
        self._free: FreeQueue = free_queue or make_free_queue(
            range(num_blocks), self._reuse, removals=False
        )
        self._head_first = free_queue is None and self._reuse in (ReuseOrder.LIFO, ReuseOrder.SPLIT)
        if len(self._free) != num_blocks:
            raise ValueError("a free_queue must start with every block")
        self._refcount: list[int] = [0] * num_blocks
        self._num_blocks = num_blocks
        self._used = 0

    def __repr__(self) -> str:
        return (
            f"BlockAllocator(num_blocks={self.num_blocks}, block_size={self._block_size}, "
            f"reuse={self._reuse.value!r}, free_blocks={self.free_blocks})"
        )

    # -- sizes ------------------------------------------------------------------------------
    @property
    def num_blocks(self) -> int:
        """Total blocks in the pool."""
        return len(self._refcount)

    @property
    def block_size(self) -> int:
        """Tokens per block."""
        return self._block_size

    @property
    def reuse(self) -> ReuseOrder:
        """The free-queue order chosen at construction."""
        return self._reuse

    @property
    def free_blocks(self) -> int:
        """Blocks with refcount 0, available to ``alloc`` (the free queue's length)."""
        return self._num_blocks - self._used

    @property
    def used_blocks(self) -> int:
        """Blocks with refcount >= 1."""
        return self._used

    @property
    def refcounts(self) -> Sequence[int]:
        """Every block's refcount, indexed by id: a live read-only view for hot paths.

        Callers must not mutate it; ``incref``/``free`` are the only writers.
        """
        return self._refcount

    def can_allocate(self, n: int) -> bool:
        """Whether ``alloc_many(n)`` would succeed now."""
        return n <= len(self._free)

    # -- hot path ---------------------------------------------------------------------------
    def alloc(self) -> BlockId:
        """Take the block at the head of the free queue; its refcount becomes 1."""
        if self._used == self._num_blocks:  # the free queue is empty
            raise OutOfBlocks(1, 0)
        block_id = self._free.pop()
        self._refcount[block_id] = 1
        self._used += 1
        return block_id

    def alloc_many(self, n: int) -> list[BlockId]:
        """Take ``n`` blocks in queue order; all or nothing (``OutOfBlocks`` changes nothing)."""
        if n < 0:
            raise ValueError(f"cannot allocate a negative number of blocks ({n})")
        free = self._num_blocks - self._used  # == len(self._free), without two calls
        if n > free:
            raise OutOfBlocks(n, free)
        ids = self._free.pop_many(n)
        refcount = self._refcount
        for block_id in ids:
            refcount[block_id] = 1
        self._used += n
        return ids

    def revive(self, block_id: BlockId) -> None:
        """Take a specific free block back with refcount 1 (a prefix-cache hit on it)."""
        self._validate(block_id)
        if self._refcount[block_id] != 0:
            raise InvalidBlockId(f"revive of used block {block_id}")
        self._free.remove(block_id)
        self._refcount[block_id] = 1
        self._used += 1

    def revive_many(self, block_ids: Sequence[BlockId], owner: int | None = None) -> None:
        """``revive`` each of ``block_ids`` (distinct, all free); the free queue takes them
        out in one call (``remove_many``, told the ``owner`` when they are the blocks a prefix
        cache's lookup for that request returned). All or nothing: a used one raises first."""
        refcount = self._refcount
        num_blocks = len(refcount)
        for block_id in block_ids:
            if not 0 <= block_id < num_blocks:
                self._validate(block_id)  # raises
            if refcount[block_id]:
                raise InvalidBlockId(f"revive of used block {block_id}")
        self._free.remove_many(block_ids, owner)
        for block_id in block_ids:
            refcount[block_id] = 1
        self._used += len(block_ids)

    def incref(self, block_id: BlockId) -> None:
        """Add a reference to a used block (prefix sharing / fork)."""
        self._validate(block_id)
        if self._refcount[block_id] == 0:
            raise InvalidBlockId(f"incref of free block {block_id}")
        self._refcount[block_id] += 1

    def free(self, block_id: BlockId) -> None:
        """Drop one reference; at zero the block returns to the free queue per ``reuse``."""
        self._validate(block_id)
        count = self._refcount[block_id]
        if count == 0:
            raise DoubleFree(f"free of free block {block_id}")
        self._refcount[block_id] = count - 1
        if count == 1:
            self._used -= 1
            self._free.push(block_id)

    def free_many(self, block_ids: Iterable[BlockId]) -> None:
        """Drop one reference per listed id (an id may repeat); all or nothing.

        Every id is validated before any refcount changes, so a bad id or a would-be double free
        raises with the allocator untouched.
        """
        ids = list(block_ids)
        for block_id, times in Counter(ids).items():
            self._validate(block_id)
            if self._refcount[block_id] < times:
                raise DoubleFree(
                    f"block {block_id} freed {times} times but has refcount "
                    f"{self._refcount[block_id]}"
                )
        for block_id in ids:
            self.free(block_id)

    def release(
        self, block_ids: Sequence[BlockId], owner: int | None = None, registered: int = 0
    ) -> int:
        """Drop one reference from each of ``block_ids``, in the order that makes the table's
        tail reused first (the class docstring; a cache evicts it first). Returns how many of them
        were shared (refcount > 1 before). The ids are distinct (one table's blocks). All or
        nothing: a free block raises ``DoubleFree`` before anything changes.

        ``owner`` (with ``registered``, the leading blocks registered in a prefix cache) says
        the blocks are all of request ``owner``'s and nobody else's (its keys are private): the
        free queue is told, so a cache can note where they went (even none), and a shared one
        raises ``InvariantViolation``."""
        if not block_ids and owner is None:
            return 0
        if block_ids and min(block_ids) < 0:
            raise DoubleFree(f"free of free block {min(block_ids)}")
        refcount = self._refcount
        shared = 0
        for block_id in block_ids:
            count = refcount[block_id]
            if count == 1:
                refcount[block_id] = 0
            elif count > 1:
                refcount[block_id] = count - 1
                shared += 1
            else:  # undo, then refuse: all or nothing
                for done in block_ids[: block_ids.index(block_id)]:
                    refcount[done] += 1
                raise DoubleFree(f"free of free block {block_id}")
        # the freed ones, the tail to be reused first; without sharing, all of them
        order = block_ids if self._head_first else block_ids[::-1]
        freed = order if not shared else [b for b in order if not refcount[b]]
        self._used -= len(freed)
        if owner is None:
            self._free.push_many(freed)
        elif shared:
            raise InvariantViolation(f"request {owner}'s private blocks are shared")
        else:
            self._free.push_many(freed, owner, registered)
        return shared

    def refcount(self, block_id: BlockId) -> int:
        """Current number of references to ``block_id`` (0 when free)."""
        self._validate(block_id)
        return self._refcount[block_id]

    def _validate(self, block_id: BlockId) -> None:
        # Negative ints would silently index from the end of the list.
        if not 0 <= block_id < len(self._refcount):
            raise InvalidBlockId(f"block id {block_id} outside [0, {len(self._refcount)})")

    # -- invariants -------------------------------------------------------------------------
    def check(self, tables: Iterable[HeldBlocks] | None = None) -> None:
        """Raise ``InvariantViolation`` if any invariant in the class docstring fails.

        ``tables`` are all the tables resident on this allocator; when given, each table's own
        shape (``len(block_ids) == ceil(length / block_size)``, matching block size) is checked
        and every refcount must equal the number of references from them. O(num_blocks + refs).
        """
        self._check_pool()
        if tables is not None:
            self._check_tables(list(tables))

    def _check_pool(self) -> None:
        total = self.num_blocks
        if len(self._free) + self._used != total:
            raise InvariantViolation(f"free {len(self._free)} + used {self._used} != total {total}")
        in_queue = set(self._free)
        if len(in_queue) != len(self._free):
            dupes = sorted(b for b, k in Counter(self._free).items() if k > 1)
            raise InvariantViolation(f"blocks {dupes} appear more than once in the free queue")
        for block_id, count in enumerate(self._refcount):
            if block_id in in_queue and count != 0:
                raise InvariantViolation(f"free block {block_id} has refcount {count}")
            if block_id not in in_queue and count < 1:
                raise InvariantViolation(f"used block {block_id} has refcount {count}")

    def _check_tables(self, tables: list[HeldBlocks]) -> None:
        refs: Counter[int] = Counter()
        for index, table in enumerate(tables):
            if table.block_size != self._block_size:
                raise InvariantViolation(
                    f"table {index} has block_size {table.block_size}, "
                    f"allocator has {self._block_size}"
                )
            expected = -(-table.length // table.block_size)
            if len(table.block_ids) != expected:
                raise InvariantViolation(
                    f"table {index} holds {len(table.block_ids)} blocks for {table.length} "
                    f"tokens, expected {expected}"
                )
            refs.update(table.block_ids)
        for block_id in refs:
            if not 0 <= block_id < self.num_blocks:
                raise InvariantViolation(f"a table references unknown block {block_id}")
        for block_id, count in enumerate(self._refcount):
            if count != refs[block_id]:
                raise InvariantViolation(
                    f"block {block_id} has refcount {count} but {refs[block_id]} table references"
                )
