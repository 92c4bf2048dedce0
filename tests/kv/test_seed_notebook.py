"""The seed notebook's checks (pagedattention_block_allocator), run against the package.

The code below reproduces the notebook's cells with the notebook's workload; each ``s.check``
becomes one test named after it.
"""

import random

import pytest

from simkv import BlockAllocator, SequenceTable, fork_sequence

BLOCK_SIZE = 16
MAX_CONTEXT = 4096
NUM_BLOCKS = 2048


def _pool_exhausts(a: BlockAllocator) -> bool:
    a.alloc()
    a.alloc()
    try:
        a.alloc()
    except RuntimeError:
        return True
    return False


def _simulate_workload(lengths: list[int]) -> tuple[float, float]:
    """(pre_paged_waste_fraction, paged_waste_fraction), as the notebook computes them."""
    pre_paged_reserved = sum(MAX_CONTEXT for _ in lengths)
    pre_paged_used = sum(lengths)
    allocator = BlockAllocator(num_blocks=NUM_BLOCKS, block_size=BLOCK_SIZE)
    seqs = [SequenceTable(block_size=BLOCK_SIZE) for _ in lengths]
    for seq, length in zip(seqs, lengths, strict=True):
        for _ in range(length):
            seq.append(allocator)
    paged_reserved = sum(len(seq.block_ids) * BLOCK_SIZE for seq in seqs)
    paged_used = sum(seq.length for seq in seqs)
    return 1 - pre_paged_used / pre_paged_reserved, 1 - paged_used / paged_reserved


@pytest.fixture(scope="module")
def alloc_cell():
    alloc = BlockAllocator(num_blocks=8, block_size=16)
    b0 = alloc.alloc()
    b1 = alloc.alloc()
    alloc.incref(b0)
    alloc.free(b0)
    alloc.free(b0)
    return alloc, b0, b1


@pytest.fixture(scope="module")
def waste():
    rng = random.Random(0)
    lengths = [max(4, int(rng.lognormvariate(mu=4.5, sigma=0.8))) for _ in range(100)]
    return _simulate_workload(lengths)


@pytest.fixture(scope="module")
def fork_cell():
    allocator = BlockAllocator(num_blocks=256, block_size=BLOCK_SIZE)
    prompt = SequenceTable(block_size=BLOCK_SIZE)
    for _ in range(100):
        prompt.append(allocator)
    blocks_before_fork = 256 - allocator.free_blocks
    child = fork_sequence(prompt, allocator)
    blocks_after_fork = 256 - allocator.free_blocks
    return allocator, prompt, child, blocks_after_fork - blocks_before_fork


def test_alloc_returns_distinct_blocks(alloc_cell):
    _, b0, b1 = alloc_cell
    assert b0 != b1


def test_refcount_reaches_zero_frees_block(alloc_cell):
    alloc, b0, _ = alloc_cell
    assert alloc.refcount(b0) == 0
    assert alloc.free_blocks == 7


def test_alloc_fails_when_pool_empty():
    assert _pool_exhausts(BlockAllocator(num_blocks=2, block_size=16))


def test_pre_paged_waste_above_60pct(waste):
    assert waste[0] >= 0.60


def test_paged_waste_bounded_by_block_size(waste):
    assert waste[1] <= 1.0 / BLOCK_SIZE


def test_paging_reduces_waste_by_at_least_10x(waste):
    assert waste[0] / max(waste[1], 1e-6) >= 10.0


def test_fork_cost_at_most_two_extra_blocks(fork_cell):
    *_, cost = fork_cell
    assert cost <= 2
    assert cost == 1  # simkv's eager fork copies only the child's trailing block


def test_full_blocks_are_shared_by_refcount(fork_cell):
    allocator, prompt, _, _ = fork_cell
    shared = prompt.block_ids[: 100 // BLOCK_SIZE]
    assert [allocator.refcount(bid) for bid in shared] == [2] * 6


def test_child_length_matches_parent(fork_cell):
    _, prompt, child, _ = fork_cell
    assert child.length == prompt.length == 100
