"""BlockAllocator: free queue order, refcounts, errors, atomicity, invariant checks."""

import pickle

import pytest

from simkv.kv.allocator import (
    BlockAllocator,
    BlockError,
    BlockId,
    DoubleFree,
    InvalidBlockId,
    InvariantViolation,
    OutOfBlocks,
    ReuseOrder,
)
from simkv.kv.block_table import SequenceTable


def test_initial_state_and_first_ids():
    a = BlockAllocator(4, block_size=8)
    assert (a.num_blocks, a.block_size, a.free_blocks, a.used_blocks) == (4, 8, 4, 0)
    assert a.reuse is ReuseOrder.FIFO
    assert [a.alloc() for _ in range(4)] == [0, 1, 2, 3]
    assert (a.free_blocks, a.used_blocks) == (0, 4)
    a.check()


def test_default_block_size_is_16():
    assert BlockAllocator(1).block_size == 16


@pytest.mark.parametrize(("num_blocks", "block_size"), [(0, 16), (-1, 16), (4, 0)])
def test_constructor_rejects_bad_sizes(num_blocks, block_size):
    with pytest.raises(ValueError):
        BlockAllocator(num_blocks, block_size)


def test_constructor_rejects_unknown_reuse_order():
    with pytest.raises(ValueError):
        BlockAllocator(4, reuse="random")


def test_fifo_reuse_puts_freed_block_last():
    a = BlockAllocator(4, reuse="fifo")
    b0, b1 = a.alloc(), a.alloc()
    a.free(b0)
    a.free(b1)
    # Free queue is now 2, 3, 0, 1.
    assert [a.alloc() for _ in range(4)] == [2, 3, 0, 1]


def test_lifo_reuse_puts_freed_block_first():
    a = BlockAllocator(4, reuse=ReuseOrder.LIFO)
    b0, b1 = a.alloc(), a.alloc()
    a.free(b0)
    a.free(b1)
    # Free queue is now 1, 0, 2, 3.
    assert [a.alloc() for _ in range(4)] == [1, 0, 2, 3]


def test_refcount_incref_and_free():
    a = BlockAllocator(3)
    b = a.alloc()
    assert a.refcount(b) == 1
    a.incref(b)
    a.incref(b)
    assert a.refcount(b) == 3
    a.free(b)
    a.free(b)
    assert (a.refcount(b), a.free_blocks, a.used_blocks) == (1, 2, 1)
    a.free(b)
    assert (a.refcount(b), a.free_blocks, a.used_blocks) == (0, 3, 0)
    a.check()


def test_alloc_raises_out_of_blocks_with_counts():
    a = BlockAllocator(1)
    a.alloc()
    with pytest.raises(OutOfBlocks) as info:
        a.alloc()
    assert (info.value.requested, info.value.free) == (1, 0)
    assert isinstance(info.value, RuntimeError)
    assert str(info.value) == "out of blocks: requested 1, 0 free"


def test_out_of_blocks_pickles():
    err = pickle.loads(pickle.dumps(OutOfBlocks(3, 1)))
    assert (err.requested, err.free) == (3, 1)


def test_alloc_many_takes_queue_order():
    a = BlockAllocator(5)
    assert a.alloc_many(3) == [0, 1, 2]
    assert a.alloc_many(0) == []
    assert (a.free_blocks, a.used_blocks) == (2, 3)
    assert [a.refcount(BlockId(b)) for b in range(5)] == [1, 1, 1, 0, 0]


def test_alloc_many_is_all_or_nothing():
    a = BlockAllocator(4)
    a.alloc()
    with pytest.raises(OutOfBlocks) as info:
        a.alloc_many(4)
    assert (info.value.requested, info.value.free) == (4, 3)
    assert (a.free_blocks, a.used_blocks) == (3, 1)
    assert a.alloc_many(3) == [1, 2, 3]


def test_alloc_many_rejects_negative():
    with pytest.raises(ValueError):
        BlockAllocator(2).alloc_many(-1)


def test_can_allocate():
    a = BlockAllocator(3)
    a.alloc()
    assert a.can_allocate(2)
    assert not a.can_allocate(3)
    assert a.can_allocate(0)


def test_double_free_raises_and_changes_nothing():
    a = BlockAllocator(2)
    b = a.alloc()
    a.free(b)
    with pytest.raises(DoubleFree):
        a.free(b)
    assert isinstance(DoubleFree("x"), BlockError)
    assert isinstance(DoubleFree("x"), ValueError)
    assert (a.free_blocks, a.used_blocks) == (2, 0)
    a.check()


@pytest.mark.parametrize("bad", [-1, 2, 100])
def test_out_of_range_ids_raise_invalid_block_id(bad):
    a = BlockAllocator(2)
    a.alloc()
    for call in (a.free, a.incref, a.refcount):
        with pytest.raises(InvalidBlockId):
            call(BlockId(bad))


def test_incref_of_free_block_raises():
    a = BlockAllocator(2)
    with pytest.raises(InvalidBlockId):
        a.incref(BlockId(0))
    assert a.refcount(BlockId(0)) == 0


def test_free_many_drops_one_reference_per_listed_id():
    a = BlockAllocator(4)
    b0, b1, b2 = a.alloc_many(3)
    a.incref(b1)
    a.free_many([b0, b1, b1, b2])
    assert (a.free_blocks, a.used_blocks) == (4, 0)
    # FIFO: 3 was never used; the freed blocks follow in free order.
    assert a.alloc_many(4) == [3, 0, 1, 2]


def test_free_many_is_all_or_nothing():
    a = BlockAllocator(3)
    b0, b1 = a.alloc_many(2)
    with pytest.raises(DoubleFree):
        a.free_many([b0, b1, b1])
    with pytest.raises(InvalidBlockId):
        a.free_many([b0, BlockId(7)])
    assert (a.refcount(b0), a.refcount(b1), a.free_blocks) == (1, 1, 1)


def test_check_passes_with_matching_tables():
    a = BlockAllocator(4, block_size=2)
    t1 = SequenceTable(block_size=2, block_ids=a.alloc_many(2), length=3)
    a.incref(t1.block_ids[0])
    t2 = SequenceTable(block_size=2, block_ids=[t1.block_ids[0]], length=2)
    a.check([t1, t2])


def test_check_detects_refcount_not_matching_tables():
    a = BlockAllocator(4, block_size=2)
    t = SequenceTable(block_size=2, block_ids=a.alloc_many(2), length=3)
    a.incref(t.block_ids[0])
    with pytest.raises(InvariantViolation, match="block 0 has refcount 2 but 1 table references"):
        a.check([t])


def test_check_detects_block_missing_from_tables():
    a = BlockAllocator(4, block_size=2)
    a.alloc()
    a.check()
    with pytest.raises(InvariantViolation, match="block 0 has refcount 1 but 0"):
        a.check([])


def test_check_detects_table_shape_and_block_size():
    a = BlockAllocator(4, block_size=2)
    ids = a.alloc_many(2)
    with pytest.raises(InvariantViolation, match="holds 2 blocks for 5 tokens, expected 3"):
        a.check([SequenceTable(block_size=2, block_ids=ids, length=5)])
    with pytest.raises(InvariantViolation, match="block_size 4"):
        a.check([SequenceTable(block_size=4, block_ids=ids, length=5)])


def test_check_detects_unknown_block_in_table():
    a = BlockAllocator(2, block_size=2)
    with pytest.raises(InvariantViolation, match="unknown block 9"):
        a.check([SequenceTable(block_size=2, block_ids=[BlockId(9)], length=1)])


# The pool-level corruptions below cannot be reached through the public API, so the tests
# break the private state on purpose to show each check can fire.


def test_check_detects_count_mismatch():
    a = BlockAllocator(3)
    a.alloc()
    a._used = 2
    with pytest.raises(InvariantViolation, match="free 2 \\+ used 2 != total 3"):
        a.check()


class _ListQueue:
    """A free queue that (wrongly) accepts duplicates, to show ``check`` catches them."""

    def __init__(self, n: int) -> None:
        self.items = [BlockId(i) for i in range(n)]

    def pop(self) -> BlockId:
        return self.items.pop(0)

    def push(self, block_id: BlockId) -> None:
        self.items.append(block_id)

    def remove(self, block_id: BlockId) -> None:
        self.items.remove(block_id)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return iter(self.items)


def test_check_detects_duplicate_in_free_queue():
    queue = _ListQueue(3)
    a = BlockAllocator(3, free_queue=queue)
    a.alloc()
    queue.items.append(BlockId(1))
    a._used = 0
    with pytest.raises(InvariantViolation, match=r"blocks \[1\] appear more than once"):
        a.check()


def test_check_detects_free_block_with_refcount():
    a = BlockAllocator(3)
    a._refcount[2] = 1
    with pytest.raises(InvariantViolation, match="free block 2 has refcount 1"):
        a.check()


def test_check_detects_used_block_with_zero_refcount():
    a = BlockAllocator(3)
    b = a.alloc()
    a._refcount[b] = 0
    with pytest.raises(InvariantViolation, match="used block 0 has refcount 0"):
        a.check()


def test_revive_takes_a_specific_free_block():
    a = BlockAllocator(4)
    b0, b1 = a.alloc(), a.alloc()
    a.free(b0)
    a.free(b1)  # free queue: 2, 3, 0, 1
    a.revive(BlockId(0))
    assert a.refcount(0) == 1 and a.free_blocks == 3
    assert [a.alloc() for _ in range(3)] == [2, 3, 1]
    with pytest.raises(InvalidBlockId):
        a.revive(BlockId(0))


def test_revive_many_takes_specific_free_blocks_all_or_nothing():
    a = BlockAllocator(5)
    ids = a.alloc_many(3)  # 0, 1, 2
    a.release(ids)  # free queue: 3, 4, 2, 1, 0
    with pytest.raises(InvalidBlockId):
        a.revive_many([BlockId(1), BlockId(7)])
    a.alloc()  # 3
    with pytest.raises(InvalidBlockId):
        a.revive_many([BlockId(0), BlockId(3)])  # 3 is used: nothing changes
    assert a.free_blocks == 4 and a.refcount(0) == 0
    a.revive_many([BlockId(0), BlockId(2)])
    assert a.refcount(0) == a.refcount(2) == 1 and a.free_blocks == 2
    assert a.alloc_many(2) == [4, 1]
    a.check()


def test_free_queue_must_hold_every_block():
    with pytest.raises(ValueError, match="every block"):
        BlockAllocator(3, free_queue=_ListQueue(2))


def test_release_frees_tail_first_and_counts_shared():
    a = BlockAllocator(4)
    ids = a.alloc_many(3)  # 0, 1, 2
    a.incref(ids[0])
    assert a.release(ids) == 1  # block 0 was shared: it keeps one reference
    assert a.refcount(0) == 1 and a.free_blocks == 3
    assert [a.alloc() for _ in range(3)] == [3, 2, 1]  # tail block returned before its head
    a.release([BlockId(3)])
    with pytest.raises(DoubleFree):
        a.release([BlockId(0), BlockId(3)])  # 3 is free: nothing changes
    assert a.refcount(0) == 1 and a.free_blocks == 1
    a.check()


@pytest.mark.parametrize("bad_at", [0, 1, 3])
def test_release_is_all_or_nothing(bad_at: int) -> None:
    a = BlockAllocator(6)
    ids = a.alloc_many(4)
    a.incref(ids[2])
    a.free(ids[bad_at])  # now free: releasing it again is a double free
    before = [a.refcount(b) for b in ids], a.free_blocks, list(a._free)
    with pytest.raises(DoubleFree):
        a.release(ids)
    assert ([a.refcount(b) for b in ids], a.free_blocks, list(a._free)) == before
    with pytest.raises(DoubleFree):
        a.release([ids[(bad_at + 1) % 4], BlockId(-1)])
    assert ([a.refcount(b) for b in ids], a.free_blocks, list(a._free)) == before
    a.check()
