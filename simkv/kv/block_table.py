"""Per-sequence block tables: logical token position → (physical block, offset); append; fork.

Copy-on-write is explicit: whenever a table stops sharing a partially filled block it records a
``CopyOp`` that the engine must perform (and then ``drain_copies``); nothing is silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from simkv.kv.allocator import BlockAllocator, BlockId, OutOfBlocks


class CopyOp(NamedTuple):
    """Copy the KV contents of physical block ``src`` into ``dst`` (same allocator)."""

    src: BlockId
    dst: BlockId


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(slots=True)
class SequenceTable:
    """The physical blocks holding one sequence's KV cache, in logical order.

    Invariants (checked by ``BlockAllocator.check(tables)``):

    * ``len(block_ids) == ceil(length / block_size)``;
    * logical position ``p`` lives at ``(block_ids[p // block_size], p % block_size)``;
    * ``pending_copies`` lists copies recorded by copy-on-write / eager fork, oldest first, whose
      destination blocks belong to this table; the engine performs them before the next step.

    The table holds one reference to each listed block on the allocator it was built with; it
    never changes refcounts itself except through that allocator.
    """

    block_size: int
    block_ids: list[BlockId] = field(default_factory=list)
    length: int = 0  # tokens stored
    pending_copies: list[CopyOp] = field(default_factory=list)

    @classmethod
    def empty(cls, block_size: int) -> SequenceTable:
        """``SequenceTable(block_size)`` without the dataclass machinery (one per request;
        ``block_size >= 1`` is the caller's to guarantee)."""
        table = cls.__new__(cls)
        table.block_size = block_size
        table.block_ids = []
        table.length = 0
        table.pending_copies = []
        return table

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {self.block_size}")
        if self.length < 0:
            raise ValueError(f"length must be >= 0, got {self.length}")

    @property
    def num_blocks(self) -> int:
        """Blocks referenced by this table."""
        return len(self.block_ids)

    def translate(self, logical_pos: int) -> tuple[BlockId, int]:
        """Map a logical token position to ``(physical_block_id, offset_in_block)``."""
        if logical_pos < 0 or logical_pos >= self.length:
            raise IndexError(f"logical_pos {logical_pos} out of range [0, {self.length})")
        return self.block_ids[logical_pos // self.block_size], logical_pos % self.block_size

    def _trailing_shared_partial(self, allocator: BlockAllocator) -> bool:
        """Whether the next token would land in a partially filled block another table holds."""
        return self.length % self.block_size != 0 and allocator.refcount(self.block_ids[-1]) > 1

    def _copy_on_write(self, allocator: BlockAllocator) -> None:
        """Replace the shared trailing block by a private copy (recorded as a ``CopyOp``)."""
        new_id = allocator.alloc()  # may raise OutOfBlocks before anything changed
        old_id = self.block_ids[-1]
        self.pending_copies.append(CopyOp(old_id, new_id))
        allocator.free(old_id)
        self.block_ids[-1] = new_id

    def append(self, allocator: BlockAllocator) -> None:
        """Append one token; allocate a block if none is partial, copy-on-write if it is shared.

        Raises ``OutOfBlocks`` (table and allocator unchanged) if a block is needed but none is
        free.
        """
        if self.length % self.block_size == 0:
            self.block_ids.append(allocator.alloc())
        elif allocator.refcount(self.block_ids[-1]) > 1:
            self._copy_on_write(allocator)
        self.length += 1

    def blocks_needed(self, n: int, allocator: BlockAllocator) -> int:
        """New blocks ``append_tokens(allocator, n)`` would allocate, including one for COW."""
        if n < 0:
            raise ValueError(f"cannot append a negative number of tokens ({n})")
        if n == 0:
            return 0
        grow = _ceil_div(self.length + n, self.block_size) - len(self.block_ids)
        return grow + int(self._trailing_shared_partial(allocator))

    def append_tokens(self, allocator: BlockAllocator, n: int) -> None:
        """Append ``n`` tokens at once, allocating exactly ``blocks_needed(n, allocator)`` blocks.

        Atomic: raises ``OutOfBlocks`` with table and allocator unchanged if too few are free.
        """
        needed = self.blocks_needed(n, allocator)
        if needed > allocator.free_blocks:
            raise OutOfBlocks(needed, allocator.free_blocks)
        if n == 0:
            return
        if self._trailing_shared_partial(allocator):
            self._copy_on_write(allocator)
        grow = _ceil_div(self.length + n, self.block_size) - len(self.block_ids)
        self.block_ids.extend(allocator.alloc_many(grow))
        self.length += n

    def free(self, allocator: BlockAllocator, hand_over: int = 0) -> None:
        """Drop this table's reference to each block and reset it to empty.

        Pending copies are discarded too: their destinations were this table's blocks, which may
        now be reused by another table, so performing them later would corrupt that table.
        ``hand_over``: the references to the first that many blocks are not dropped but handed
        to a table the caller forks next with ``fork_sequence(..., adopt=hand_over)`` (blocks
        still held elsewhere, so dropping and re-taking them would change nothing but time).
        """
        allocator.free_many(self.block_ids[hand_over:])
        self.block_ids = []
        self.length = 0
        self.pending_copies = []

    def drain_copies(self) -> list[CopyOp]:
        """Return the recorded copies (oldest first) and clear them; the engine performs them."""
        copies, self.pending_copies = self.pending_copies, []
        return copies


def fork_sequence(
    parent: SequenceTable,
    allocator: BlockAllocator,
    mode: Literal["eager", "lazy"] = "eager",
    adopt: int = 0,
) -> SequenceTable:
    """Create a child with the parent's contents, sharing blocks by refcount.

    ``eager`` (default): the child shares every full block; a partial trailing block is copied
    into a freshly allocated block for the child (``CopyOp(parent_trailing, child_new)`` in
    ``child.pending_copies``). Costs at most one block. The parent keeps its trailing block
    untouched; the seed notebook's eager fork instead swapped the parent's trailing block for a
    fresh, never-written one and freed the old one, losing the parent's data.

    ``lazy``: the child shares every block, including a partial trailing one; the first append
    into a shared partial block, on either side, copies it then. Costs no block.

    Atomic: ``OutOfBlocks`` leaves parent and allocator unchanged. ``adopt``: the child takes
    over references to the parent's first that many blocks handed over by a table freed with
    ``free(allocator, hand_over=adopt)`` instead of taking new ones.
    """
    if mode not in ("eager", "lazy"):
        raise ValueError(f"fork mode must be 'eager' or 'lazy', got {mode!r}")
    partial = parent.length % parent.block_size != 0
    if mode == "lazy" or not partial:
        shared = list(parent.block_ids)
        copies: list[CopyOp] = []
    else:
        new_id = allocator.alloc()  # the only step that can fail, taken first
        shared = parent.block_ids[:-1]
        copies = [CopyOp(parent.block_ids[-1], new_id)]
    for block_id in shared[adopt:]:
        allocator.incref(block_id)
    own = [op.dst for op in copies]
    return SequenceTable(
        block_size=parent.block_size,
        block_ids=shared + own,
        length=parent.length,
        pending_copies=copies,
    )
