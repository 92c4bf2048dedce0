"""CPU swap pool: move one request's block tables between GPU and CPU block pools.

A request's sequences (e.g. beams forked from one prompt) form a *group* that moves together and
may share blocks. Moving a group gives each distinct source block exactly one destination block,
so sharing inside the group survives the move.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from simkv.kv.allocator import BlockAllocator, BlockId, InvalidBlockId, OutOfBlocks
from simkv.kv.block_table import SequenceTable


class AllocStatus(StrEnum):
    """Whether blocks can be had now (``OK``), after others free some (``LATER``), or never:
    vLLM v0's ``AllocStatus``, the answer of every can-allocate / can-swap question."""

    OK = "ok"
    LATER = "later"
    NEVER = "never"


@dataclass(frozen=True, slots=True)
class SwapResult:
    """One completed move: ``mapping`` is source block → destination block (one per distinct
    source block), ``num_blocks == len(mapping)``, ``bytes_moved == num_blocks * block_bytes``."""

    mapping: dict[BlockId, BlockId]
    num_blocks: int
    bytes_moved: int


def _decide(distinct_blocks: int, target: BlockAllocator) -> AllocStatus:
    if distinct_blocks > target.num_blocks:
        return AllocStatus.NEVER
    if distinct_blocks > target.free_blocks:
        return AllocStatus.LATER
    return AllocStatus.OK


def _references(tables: list[SequenceTable]) -> Counter[BlockId]:
    """References per block from the group, in first-seen order."""
    refs: Counter[BlockId] = Counter()
    for table in tables:
        refs.update(table.block_ids)
    return refs


class SwapPool:
    """A CPU block pool (``cpu``) that GPU block tables are swapped out to and back in from.

    Invariants: ``cpu`` refcounts equal the references from the tables currently swapped out
    (tables hold CPU ids while swapped out, GPU ids otherwise); ``bytes_moved`` is always
    ``num_blocks * block_bytes``.

    Moving a group decrements each source block's refcount once per reference from the group. A
    source block also held by a table *outside* the group therefore stays allocated on the source
    side (its refcount just drops), and the group gets its own copy on the destination side: that
    sharing is not restored when the group moves back.

    Residency is the caller's to track: a table does not know which pool its ids belong to. While
    a group is swapped out its tables may only be freed on ``cpu`` or swapped back in; appending
    to or forking them on the GPU allocator would mix CPU and GPU ids. An empty table (0 blocks)
    moves with its group at no cost and is swapped out like any other member.
    """

    __slots__ = ("block_bytes", "cpu")

    def __init__(self, num_cpu_blocks: int, block_size: int, block_bytes: int) -> None:
        if block_bytes < 1:
            raise ValueError(f"block_bytes must be >= 1, got {block_bytes}")
        self.cpu = BlockAllocator(num_cpu_blocks, block_size)
        self.block_bytes = block_bytes

    @property
    def num_blocks(self) -> int:
        """CPU blocks in the pool."""
        return self.cpu.num_blocks

    @property
    def free_blocks(self) -> int:
        """CPU blocks available for swap-out."""
        return self.cpu.free_blocks

    @property
    def used_blocks(self) -> int:
        """CPU blocks holding swapped-out KV."""
        return self.cpu.used_blocks

    @property
    def block_size(self) -> int:
        """Tokens per block (same on GPU and CPU)."""
        return self.cpu.block_size

    def can_take(self, num_blocks: int) -> AllocStatus:
        """Whether ``num_blocks`` CPU blocks are free now (OK), only after others leave
        (LATER) or never (NEVER: more than the pool holds)."""
        return _decide(num_blocks, self.cpu)

    def can_swap_out(self, tables: Iterable[SequenceTable]) -> AllocStatus:
        """Whether the group's distinct GPU blocks fit in the CPU pool now / ever."""
        return _decide(len(_references(list(tables))), self.cpu)

    def can_swap_in(self, tables: Iterable[SequenceTable], gpu: BlockAllocator) -> AllocStatus:
        """Whether the group's distinct CPU blocks fit in the GPU pool now / ever."""
        return _decide(len(_references(list(tables))), gpu)

    def swap_out(self, tables: Iterable[SequenceTable], gpu: BlockAllocator) -> SwapResult:
        """Move the group from ``gpu`` to the CPU pool; the tables then hold CPU block ids.

        Raises ``OutOfBlocks`` unless ``can_swap_out`` is ``OK`` and ``ValueError`` if a table has
        pending copies or the block sizes differ; either way nothing changes.
        """
        return self._move(list(tables), source=gpu, target=self.cpu)

    def swap_in(self, tables: Iterable[SequenceTable], gpu: BlockAllocator) -> SwapResult:
        """Move the group from the CPU pool back to ``gpu``; the inverse of ``swap_out``."""
        return self._move(list(tables), source=self.cpu, target=gpu)

    def _move(
        self, tables: list[SequenceTable], source: BlockAllocator, target: BlockAllocator
    ) -> SwapResult:
        refs = _references(tables)
        self._validate(tables, refs, source, target)
        if _decide(len(refs), target) is not AllocStatus.OK:
            raise OutOfBlocks(len(refs), target.free_blocks)
        mapping = dict(zip(refs, target.alloc_many(len(refs)), strict=True))
        for block_id, count in refs.items():
            for _ in range(count - 1):
                target.incref(mapping[block_id])
            for _ in range(count):
                source.free(block_id)
        for table in tables:
            table.block_ids = [mapping[block_id] for block_id in table.block_ids]
        return SwapResult(mapping, len(mapping), len(mapping) * self.block_bytes)

    def _validate(
        self,
        tables: list[SequenceTable],
        refs: Counter[BlockId],
        source: BlockAllocator,
        target: BlockAllocator,
    ) -> None:
        """Reject a move that could fail halfway, before anything changes."""
        if source.block_size != target.block_size:
            raise ValueError(
                f"block sizes differ: source {source.block_size}, target {target.block_size}"
            )
        for index, table in enumerate(tables):
            if table.pending_copies:
                raise ValueError(f"table {index} has pending copies; drain them before a swap")
        for block_id, count in refs.items():
            if source.refcount(block_id) < count:
                raise InvalidBlockId(
                    f"block {block_id} is referenced {count} times by the group but has "
                    f"refcount {source.refcount(block_id)}"
                )
