"""SwapPool: decisions, mapping, refcounts and bytes for swap-out and swap-in of a group."""

import pytest

from simkv.kv.allocator import BlockAllocator, BlockId, OutOfBlocks
from simkv.kv.block_table import CopyOp, SequenceTable, fork_sequence
from simkv.kv.swap import AllocStatus, SwapPool, SwapResult


def _filled(allocator: BlockAllocator, n_tokens: int) -> SequenceTable:
    table = SequenceTable(block_size=allocator.block_size)
    table.append_tokens(allocator, n_tokens)
    return table


def _refcounts(allocator: BlockAllocator) -> list[int]:
    return [allocator.refcount(BlockId(b)) for b in range(allocator.num_blocks)]


def test_pool_sizes_and_validation():
    pool = SwapPool(num_cpu_blocks=5, block_size=4, block_bytes=1024)
    assert (pool.num_blocks, pool.free_blocks, pool.used_blocks) == (5, 5, 0)
    assert (pool.block_size, pool.block_bytes, pool.cpu.num_blocks) == (4, 1024, 5)
    with pytest.raises(ValueError):
        SwapPool(num_cpu_blocks=5, block_size=4, block_bytes=0)
    with pytest.raises(ValueError):
        SwapPool(num_cpu_blocks=0, block_size=4, block_bytes=1)


def test_swap_out_and_in_of_a_forked_group_keeps_sharing():
    gpu = BlockAllocator(8, block_size=4)
    other = _filled(gpu, 1)  # holds block 0, so the group's ids start at 1
    parent = _filled(gpu, 9)  # [1, 2, 3]
    child = fork_sequence(parent, gpu, mode="lazy")
    pool = SwapPool(num_cpu_blocks=4, block_size=4, block_bytes=100)

    out = pool.swap_out([parent, child], gpu)
    assert out == SwapResult({BlockId(1): 0, BlockId(2): 1, BlockId(3): 2}, 3, 300)
    assert (parent.block_ids, child.block_ids) == ([0, 1, 2], [0, 1, 2])
    assert _refcounts(pool.cpu) == [2, 2, 2, 0]
    assert (gpu.free_blocks, pool.free_blocks) == (7, 1)
    gpu.check([other])
    pool.cpu.check([parent, child])

    back = pool.swap_in([parent, child], gpu)
    # GPU FIFO queue after the swap-out: 4, 5, 6, 7, 1, 2, 3.
    assert back == SwapResult({BlockId(0): 4, BlockId(1): 5, BlockId(2): 6}, 3, 300)
    assert (parent.block_ids, child.block_ids, parent.length) == ([4, 5, 6], [4, 5, 6], 9)
    assert (gpu.free_blocks, pool.free_blocks) == (4, 4)
    gpu.check([other, parent, child])
    pool.cpu.check([])


def test_block_shared_outside_group_stays_on_gpu():
    gpu = BlockAllocator(6, block_size=2)
    parent = _filled(gpu, 4)  # [0, 1]
    child = fork_sequence(parent, gpu)  # shares both full blocks
    pool = SwapPool(num_cpu_blocks=4, block_size=2, block_bytes=8)
    result = pool.swap_out([child], gpu)
    assert result.num_blocks == 2
    assert (result.bytes_moved, child.block_ids) == (16, [0, 1])  # CPU ids happen to be 0, 1
    assert _refcounts(gpu)[:2] == [1, 1]
    assert gpu.free_blocks == 4
    gpu.check([parent])
    pool.cpu.check([child])


def test_decisions_ok_later_never():
    gpu = BlockAllocator(8, block_size=2)
    group = [_filled(gpu, 6)]  # 3 distinct blocks
    assert SwapPool(3, 2, 1).can_swap_out(group) is AllocStatus.OK
    assert SwapPool(2, 2, 1).can_swap_out(group) is AllocStatus.NEVER
    pool = SwapPool(4, 2, 1)
    pool.cpu.alloc_many(2)
    assert pool.can_swap_out(group) is AllocStatus.LATER
    assert pool.can_swap_in(group, BlockAllocator(2, 2)) is AllocStatus.NEVER
    small = BlockAllocator(4, 2)
    small.alloc_many(2)
    assert pool.can_swap_in(group, small) is AllocStatus.LATER
    assert pool.can_swap_in(group, BlockAllocator(3, 2)) is AllocStatus.OK


def test_shared_blocks_count_once_in_decision():
    gpu = BlockAllocator(8, block_size=2)
    parent = _filled(gpu, 4)
    child = fork_sequence(parent, gpu, mode="lazy")
    assert SwapPool(2, 2, 1).can_swap_out([parent, child]) is AllocStatus.OK


@pytest.mark.parametrize("cpu_blocks", [1, 3])
def test_swap_out_refused_changes_nothing(cpu_blocks):
    gpu = BlockAllocator(4, block_size=2)
    table = _filled(gpu, 4)
    pool = SwapPool(cpu_blocks, 2, 1)
    if cpu_blocks == 3:
        pool.cpu.alloc_many(2)  # LATER
    with pytest.raises(OutOfBlocks) as info:
        pool.swap_out([table], gpu)
    assert info.value.requested == 2
    assert (table.block_ids, _refcounts(gpu)) == ([0, 1], [1, 1, 0, 0])


def test_swap_in_refused_changes_nothing():
    gpu = BlockAllocator(3, block_size=2)
    table = _filled(gpu, 4)
    pool = SwapPool(4, 2, 1)
    pool.swap_out([table], gpu)
    gpu.alloc_many(2)
    with pytest.raises(OutOfBlocks) as info:
        pool.swap_in([table], gpu)
    assert (info.value.requested, info.value.free) == (2, 1)
    assert (table.block_ids, pool.used_blocks) == ([0, 1], 2)


def test_swap_rejects_pending_copies():
    gpu = BlockAllocator(4, block_size=2)
    parent = _filled(gpu, 3)
    child = fork_sequence(parent, gpu)
    assert child.pending_copies == [CopyOp(BlockId(1), BlockId(2))]
    pool = SwapPool(4, 2, 1)
    with pytest.raises(ValueError, match="pending copies"):
        pool.swap_out([parent, child], gpu)
    assert pool.used_blocks == 0
    child.drain_copies()
    assert pool.swap_out([parent, child], gpu).num_blocks == 3


def test_swap_rejects_block_size_mismatch():
    gpu = BlockAllocator(4, block_size=2)
    table = _filled(gpu, 2)
    with pytest.raises(ValueError, match="block sizes differ"):
        SwapPool(4, 4, 1).swap_out([table], gpu)


def test_empty_group_moves_nothing():
    gpu = BlockAllocator(2, block_size=2)
    pool = SwapPool(2, 2, 64)
    assert pool.swap_out([SequenceTable(block_size=2)], gpu) == SwapResult({}, 0, 0)


def test_group_with_an_empty_table_moves_its_other_blocks_only():
    gpu = BlockAllocator(4, block_size=2)
    empty = SequenceTable(block_size=2)
    full = _filled(gpu, 3)  # [0, 1]
    pool = SwapPool(3, 2, 10)
    out = pool.swap_out([empty, full], gpu)
    assert out == SwapResult({BlockId(0): 0, BlockId(1): 1}, 2, 20)
    assert (empty.block_ids, empty.length, full.block_ids) == ([], 0, [0, 1])
    gpu.check([])
    pool.cpu.check([empty, full])
    back = pool.swap_in([empty, full], gpu)
    # GPU FIFO queue after the swap-out: 2, 3, 0, 1.
    assert back == SwapResult({BlockId(0): 2, BlockId(1): 3}, 2, 20)
    assert (empty.block_ids, full.block_ids, full.length) == ([], [2, 3], 3)
    gpu.check([empty, full])
    pool.cpu.check([])
