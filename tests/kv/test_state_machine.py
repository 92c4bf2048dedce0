"""Stateful property test of the KV core: allocator, block tables, fork/COW and the swap pool.

A model keeps, for every live table, the token values it should hold, and a fake memory keeps
what each physical block holds. Copies recorded by the core are applied to that memory the way
an engine would, so any missed or wrong copy-on-write shows up as a table reading wrong values.
"""

from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from simkv.kv.allocator import BlockAllocator, BlockId, OutOfBlocks
from simkv.kv.block_table import SequenceTable, fork_sequence
from simkv.kv.swap import AllocStatus, SwapPool

BLOCK_BYTES = 64
Memory = list[list[int | None]]


@dataclass(eq=False)
class Tracked:
    """A table and the token values (one per position) the model says it holds.

    Compared by identity: two empty tables are equal as values, and the model must never
    mistake one sequence for another when it moves or removes a group.
    """

    table: SequenceTable
    tokens: list[int] = field(default_factory=list)


def _refcounts(allocator: BlockAllocator) -> tuple[int, ...]:
    return tuple(allocator.refcount(BlockId(b)) for b in range(allocator.num_blocks))


def _expected_decision(distinct_blocks: int, target: BlockAllocator) -> AllocStatus:
    if distinct_blocks > target.num_blocks:
        return AllocStatus.NEVER
    if distinct_blocks > target.free_blocks:
        return AllocStatus.LATER
    return AllocStatus.OK


class KVMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.gpu_groups: list[list[Tracked]] = []
        self.cpu_groups: list[list[Tracked]] = []
        self.next_token = 0

    @initialize(
        num_blocks=st.integers(4, 24),
        block_size=st.integers(1, 8),
        cpu_blocks=st.integers(1, 24),
        reuse=st.sampled_from(["fifo", "lifo"]),
    )
    def setup(self, num_blocks: int, block_size: int, cpu_blocks: int, reuse: str) -> None:
        self.gpu = BlockAllocator(num_blocks, block_size, reuse=reuse)
        self.pool = SwapPool(cpu_blocks, block_size, BLOCK_BYTES)
        self.gpu_mem: Memory = [[None] * block_size for _ in range(num_blocks)]
        self.cpu_mem: Memory = [[None] * block_size for _ in range(cpu_blocks)]

    # -- helpers ----------------------------------------------------------------------------
    def _gpu_tracked(self) -> list[Tracked]:
        return [t for group in self.gpu_groups for t in group]

    def _cpu_tracked(self) -> list[Tracked]:
        return [t for group in self.cpu_groups for t in group]

    def _snapshot(self) -> tuple:
        tables = [
            (tuple(t.table.block_ids), t.table.length)
            for t in self._gpu_tracked() + self._cpu_tracked()
        ]
        return tables, _refcounts(self.gpu), _refcounts(self.pool.cpu)

    def _apply_copies(self, tracked: Tracked) -> None:
        for op in tracked.table.drain_copies():
            assert op.src != op.dst
            assert op.dst in tracked.table.block_ids
            self.gpu_mem[op.dst] = list(self.gpu_mem[op.src])

    def _write(self, tracked: Tracked, n: int) -> None:
        """Copy first (as the engine would), then write the ``n`` newest tokens."""
        self._apply_copies(tracked)
        for pos in range(len(tracked.tokens), len(tracked.tokens) + n):
            block_id, offset = tracked.table.translate(pos)
            self.gpu_mem[block_id][offset] = self.next_token
            tracked.tokens.append(self.next_token)
            self.next_token += 1

    def _grow(self, tracked: Tracked, n: int, one_by_one: bool) -> None:
        table = tracked.table
        needed, free_before = table.blocks_needed(n, self.gpu), self.gpu.free_blocks
        before = self._snapshot()
        try:
            if one_by_one:
                table.append(self.gpu)
            else:
                table.append_tokens(self.gpu, n)
        except OutOfBlocks:
            assert needed > free_before
            assert self._snapshot() == before
            return
        assert free_before - self.gpu.free_blocks == needed
        self._write(tracked, n)

    # -- rules ------------------------------------------------------------------------------
    @rule(k=st.integers(0, 30))
    def new_sequence(self, k: int) -> None:
        tracked = Tracked(SequenceTable(block_size=self.gpu.block_size))
        self._grow(tracked, k, one_by_one=False)
        if tracked.table.length == k:
            self.gpu_groups.append([tracked])

    # Appends and forks pick GPU-resident tables only: the engine never grows a swapped-out
    # table (its ids are CPU ids), it swaps the group back in first.
    @precondition(lambda self: self.gpu_groups)
    @rule(i=st.integers(0, 10**6))
    def append_one(self, i: int) -> None:
        tables = self._gpu_tracked()
        self._grow(tables[i % len(tables)], 1, one_by_one=True)

    @precondition(lambda self: self.gpu_groups)
    @rule(i=st.integers(0, 10**6), k=st.integers(0, 20))
    def append_many(self, i: int, k: int) -> None:
        tables = self._gpu_tracked()
        self._grow(tables[i % len(tables)], k, one_by_one=False)

    @precondition(lambda self: self.gpu_groups)
    @rule(g=st.integers(0, 10**6), i=st.integers(0, 10**6), mode=st.sampled_from(["eager", "lazy"]))
    def fork(self, g: int, i: int, mode: str) -> None:
        group = self.gpu_groups[g % len(self.gpu_groups)]
        parent = group[i % len(group)]
        partial = parent.table.length % self.gpu.block_size != 0
        cost = int(mode == "eager" and partial)
        free_before, before = self.gpu.free_blocks, self._snapshot()
        try:
            child = fork_sequence(parent.table, self.gpu, mode=mode)  # type: ignore[arg-type]
        except OutOfBlocks:
            assert cost == 1 and free_before == 0
            assert self._snapshot() == before
            return
        assert free_before - self.gpu.free_blocks == cost
        assert child.length == parent.table.length
        tracked = Tracked(child, list(parent.tokens))
        self._apply_copies(tracked)
        group.append(tracked)

    @precondition(lambda self: self.gpu_groups)
    @rule(i=st.integers(0, 10**6))
    def free_gpu_table(self, i: int) -> None:
        self._free_one(self.gpu_groups, i, self.gpu)

    @precondition(lambda self: self.cpu_groups)
    @rule(i=st.integers(0, 10**6))
    def free_swapped_table(self, i: int) -> None:
        self._free_one(self.cpu_groups, i, self.pool.cpu)

    def _free_one(self, groups: list[list[Tracked]], i: int, allocator: BlockAllocator) -> None:
        index = i % len(groups)
        group = groups[index]
        tracked = group.pop(i % len(group))
        tracked.table.free(allocator)
        assert (tracked.table.length, tracked.table.block_ids) == (0, [])
        if not group:
            del groups[index]  # by position: an empty group equals every other empty group

    @precondition(lambda self: self.gpu_groups)
    @rule(g=st.integers(0, 10**6))
    def swap_out(self, g: int) -> None:
        self._swap(g, out=True)

    @precondition(lambda self: self.cpu_groups)
    @rule(g=st.integers(0, 10**6))
    def swap_in(self, g: int) -> None:
        self._swap(g, out=False)

    def _swap(self, g: int, out: bool) -> None:
        groups, others = (
            (self.gpu_groups, self.cpu_groups) if out else (self.cpu_groups, self.gpu_groups)
        )
        source, target = (self.gpu, self.pool.cpu) if out else (self.pool.cpu, self.gpu)
        src_mem, dst_mem = (self.gpu_mem, self.cpu_mem) if out else (self.cpu_mem, self.gpu_mem)
        index = g % len(groups)
        group = groups[index]
        tables = [t.table for t in group]
        distinct = len({b for t in tables for b in t.block_ids})
        if out:
            decision = self.pool.can_swap_out(tables)
        else:
            decision = self.pool.can_swap_in(tables, self.gpu)
        assert decision is _expected_decision(distinct, target)
        free_before, before = (source.free_blocks, target.free_blocks), self._snapshot()
        move = self.pool.swap_out if out else self.pool.swap_in
        if decision is not AllocStatus.OK:
            with pytest.raises(OutOfBlocks):
                move(tables, self.gpu)
            assert self._snapshot() == before
            return
        result = move(tables, self.gpu)
        assert (result.num_blocks, result.bytes_moved) == (distinct, distinct * BLOCK_BYTES)
        # Every block a group holds is shared only inside the group, so all of them move.
        assert source.free_blocks - free_before[0] == distinct
        assert free_before[1] - target.free_blocks == distinct
        for src, dst in result.mapping.items():
            dst_mem[dst] = list(src_mem[src])
        # By position, not ``list.remove``: groups of empty tables compare equal, and moving the
        # wrong one would leave one group listed as both GPU- and CPU-resident.
        others.append(groups.pop(index))

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def groups_partition_tables(self) -> None:
        """Each group is non-empty and each table lives in exactly one group, on one side."""
        groups = self.gpu_groups + self.cpu_groups
        assert all(groups)
        assert len({id(group) for group in groups}) == len(groups)
        tables = [id(t.table) for group in groups for t in group]
        assert len(set(tables)) == len(tables)

    @invariant()
    def allocators_consistent(self) -> None:
        if not hasattr(self, "gpu"):
            return
        self.gpu.check(t.table for t in self._gpu_tracked())
        self.pool.cpu.check(t.table for t in self._cpu_tracked())

    @invariant()
    def tables_match_model(self) -> None:
        if not hasattr(self, "gpu"):
            return
        bs = self.gpu.block_size
        for mem, tracked_list in (
            (self.gpu_mem, self._gpu_tracked()),
            (self.cpu_mem, self._cpu_tracked()),
        ):
            for tracked in tracked_list:
                table = tracked.table
                assert table.length == len(tracked.tokens)
                assert table.num_blocks == -(-len(tracked.tokens) // bs)
                assert table.pending_copies == []
                stored = [mem[b][o] for b, o in map(table.translate, range(table.length))]
                assert stored == tracked.tokens


KVMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestKVMachine = KVMachine.TestCase
