"""SequenceTable and fork_sequence: translation, append, copy-on-write, eager and lazy fork."""

import pytest

from simkv.kv.allocator import BlockAllocator, BlockId, OutOfBlocks
from simkv.kv.block_table import CopyOp, SequenceTable, fork_sequence


def _filled(allocator: BlockAllocator, n_tokens: int) -> SequenceTable:
    table = SequenceTable(block_size=allocator.block_size)
    table.append_tokens(allocator, n_tokens)
    return table


def _refcounts(allocator: BlockAllocator) -> list[int]:
    return [allocator.refcount(BlockId(b)) for b in range(allocator.num_blocks)]


def test_defaults_and_validation():
    t = SequenceTable(block_size=4)
    assert (t.block_ids, t.length, t.pending_copies, t.num_blocks) == ([], 0, [], 0)
    with pytest.raises(ValueError):
        SequenceTable(block_size=0)
    with pytest.raises(ValueError):
        SequenceTable(block_size=4, length=-1)


def test_translate_maps_positions():
    t = SequenceTable(block_size=4, block_ids=[BlockId(7), BlockId(2)], length=6)
    assert t.translate(0) == (7, 0)
    assert t.translate(3) == (7, 3)
    assert t.translate(4) == (2, 0)
    assert t.translate(5) == (2, 1)
    for bad in (-1, 6):
        with pytest.raises(IndexError):
            t.translate(bad)


def test_append_allocates_only_at_block_boundaries():
    a = BlockAllocator(4, block_size=3)
    t = SequenceTable(block_size=3)
    free_after = []
    for _ in range(7):
        t.append(a)
        free_after.append(a.free_blocks)
    assert free_after == [3, 3, 3, 2, 2, 2, 1]
    assert (t.block_ids, t.length, t.pending_copies) == ([0, 1, 2], 7, [])


def test_append_out_of_blocks_leaves_table_unchanged():
    a = BlockAllocator(1, block_size=2)
    t = _filled(a, 2)
    with pytest.raises(OutOfBlocks):
        t.append(a)
    assert (t.block_ids, t.length) == ([0], 2)


def test_append_into_shared_partial_block_copies_on_write():
    a = BlockAllocator(4, block_size=4)
    t = _filled(a, 6)  # blocks [0, 1], block 1 holds 2 tokens
    a.incref(t.block_ids[1])  # someone else shares the partial block
    t.append(a)
    assert t.block_ids == [0, 2]
    assert t.pending_copies == [CopyOp(BlockId(1), BlockId(2))]
    assert (a.refcount(BlockId(1)), a.refcount(BlockId(2)), t.length) == (1, 1, 7)


def test_append_into_shared_full_block_allocates_without_copy():
    a = BlockAllocator(4, block_size=2)
    t = _filled(a, 2)
    a.incref(t.block_ids[0])
    t.append(a)
    assert (t.block_ids, t.pending_copies) == ([0, 1], [])


@pytest.mark.parametrize(
    ("length", "n", "expected_blocks", "expected_new"),
    [
        (0, 0, 0, 0),
        (0, 1, 1, 1),
        (0, 4, 1, 1),
        (0, 5, 2, 2),
        (3, 1, 1, 0),
        (3, 2, 2, 1),
        (4, 9, 4, 3),
        (5, 3, 2, 0),
    ],
)
def test_append_tokens_allocates_exact_block_counts(length, n, expected_blocks, expected_new):
    a = BlockAllocator(8, block_size=4)
    t = _filled(a, length)
    assert t.blocks_needed(n, a) == expected_new
    before = a.free_blocks
    t.append_tokens(a, n)
    assert (t.length, t.num_blocks) == (length + n, expected_blocks)
    assert before - a.free_blocks == expected_new


def test_blocks_needed_counts_copy_on_write():
    a = BlockAllocator(8, block_size=4)
    t = _filled(a, 6)
    a.incref(t.block_ids[1])
    assert t.blocks_needed(0, a) == 0
    assert t.blocks_needed(1, a) == 1
    assert t.blocks_needed(2, a) == 1
    assert t.blocks_needed(3, a) == 2
    t.append_tokens(a, 3)
    assert t.block_ids == [0, 2, 3]
    assert t.pending_copies == [CopyOp(BlockId(1), BlockId(2))]
    assert t.length == 9


def test_append_tokens_is_atomic():
    a = BlockAllocator(3, block_size=4)
    t = _filled(a, 6)
    a.incref(t.block_ids[1])
    before = _refcounts(a)
    with pytest.raises(OutOfBlocks) as info:
        t.append_tokens(a, 3)  # needs COW + 1 new block = 2, only 1 free
    assert (info.value.requested, info.value.free) == (2, 1)
    assert (t.block_ids, t.length, t.pending_copies) == ([0, 1], 6, [])
    assert _refcounts(a) == before


def test_negative_token_count_rejected():
    a = BlockAllocator(2, block_size=4)
    with pytest.raises(ValueError):
        SequenceTable(block_size=4).append_tokens(a, -1)


def test_free_resets_and_returns_blocks():
    a = BlockAllocator(4, block_size=2)
    t = _filled(a, 3)
    t.pending_copies.append(CopyOp(BlockId(0), BlockId(1)))
    t.free(a)
    assert (t.block_ids, t.length, t.pending_copies, a.free_blocks) == ([], 0, [], 4)


def test_drain_copies_returns_and_clears():
    t = SequenceTable(block_size=2, pending_copies=[CopyOp(BlockId(1), BlockId(2))])
    assert t.drain_copies() == [CopyOp(BlockId(1), BlockId(2))]
    assert t.pending_copies == []
    assert t.drain_copies() == []


def test_lazy_fork_golden_example():
    a = BlockAllocator(10, block_size=16)
    parent = _filled(a, 40)
    assert (parent.block_ids, a.free_blocks) == ([0, 1, 2], 7)
    child = fork_sequence(parent, a, mode="lazy")
    assert [a.refcount(b) for b in (0, 1, 2)] == [2, 2, 2]
    assert (child.block_ids, child.length, a.free_blocks) == ([0, 1, 2], 40, 7)
    child.append(a)
    assert child.block_ids == [0, 1, 3]
    assert child.drain_copies() == [CopyOp(BlockId(2), BlockId(3))]
    assert a.free_blocks == 6
    a.check([parent, child])
    parent.free(a)
    child.free(a)
    assert a.free_blocks == 10
    a.check([])


def test_lazy_fork_parent_append_also_copies():
    a = BlockAllocator(6, block_size=4)
    parent = _filled(a, 5)  # [0, 1]
    child = fork_sequence(parent, a, mode="lazy")
    parent.append(a)
    assert parent.block_ids == [0, 2]
    assert parent.pending_copies == [CopyOp(BlockId(1), BlockId(2))]
    child.append(a)  # block 1 is now private to the child: write in place
    assert (child.block_ids, child.pending_copies) == ([0, 1], [])
    a.check([parent, child])


def test_eager_fork_copies_partial_trailing_block_for_child_only():
    a = BlockAllocator(6, block_size=4)
    parent = _filled(a, 10)  # [0, 1, 2], block 2 holds 2 tokens
    child = fork_sequence(parent, a)
    assert parent.block_ids == [0, 1, 2]
    assert parent.pending_copies == []
    assert (child.block_ids, child.length) == ([0, 1, 3], 10)
    assert child.pending_copies == [CopyOp(BlockId(2), BlockId(3))]
    assert _refcounts(a) == [2, 2, 1, 1, 0, 0]
    parent.append(a)
    child.append(a)
    assert (parent.block_ids, child.block_ids, a.free_blocks) == ([0, 1, 2], [0, 1, 3], 2)
    a.check([parent, child])


def test_eager_fork_of_block_aligned_parent_costs_nothing():
    a = BlockAllocator(4, block_size=4)
    parent = _filled(a, 8)
    child = fork_sequence(parent, a, mode="eager")
    assert (child.block_ids, child.pending_copies, a.free_blocks) == ([0, 1], [], 2)
    a.check([parent, child])


def test_eager_fork_is_atomic_when_out_of_blocks():
    a = BlockAllocator(2, block_size=4)
    parent = _filled(a, 5)
    with pytest.raises(OutOfBlocks):
        fork_sequence(parent, a, mode="eager")
    assert _refcounts(a) == [1, 1]
    assert (parent.block_ids, parent.length) == ([0, 1], 5)


def test_fork_of_empty_parent():
    a = BlockAllocator(2, block_size=4)
    child = fork_sequence(SequenceTable(block_size=4), a)
    assert (child.block_ids, child.length, a.free_blocks) == ([], 0, 2)


def test_fork_rejects_unknown_mode():
    a = BlockAllocator(2, block_size=4)
    with pytest.raises(ValueError):
        fork_sequence(SequenceTable(block_size=4), a, mode="deep")  # type: ignore[arg-type]


def test_empty_equals_a_constructed_table():
    assert SequenceTable.empty(4) == SequenceTable(block_size=4)
    table = SequenceTable.empty(4)
    table.block_ids.append(BlockId(0))
    assert SequenceTable.empty(4).block_ids == []  # fresh lists each time
