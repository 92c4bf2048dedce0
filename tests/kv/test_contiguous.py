"""Buddy allocator and contiguous reservation policies: placement, coalescing, waste split."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.kv.allocator import OutOfBlocks
from simkv.kv.contiguous import (
    BuddyAllocator,
    Chunk,
    ContiguousAllocator,
    ReservationPolicy,
    next_pow2,
)
from simkv.kv.waste import WasteBreakdown


def test_next_pow2():
    assert [next_pow2(n) for n in (0, 1, 2, 3, 4, 5, 9, 17, 4096, 4097)] == [
        *(1, 1, 2, 4, 4, 8, 16, 32, 4096, 8192)
    ]


def test_buddy_splits_to_exact_offsets_and_sizes():
    b = BuddyAllocator(16)
    assert b.alloc(3) == Chunk(0, 4)
    assert b.free_chunk_sizes() == [4, 8]  # 4@4, 8@8
    assert b.alloc(1) == Chunk(4, 1)  # splits 4@4 into 1@4 (taken), 1@5, 2@6
    assert b.alloc(5) == Chunk(8, 8)
    assert b.free_chunk_sizes() == [1, 2]
    assert (b.free_slots, b.largest_free_chunk) == (3, 2)
    assert b.alloc(2) == Chunk(6, 2)
    b.check()


def test_buddy_free_coalesces_back_to_one_chunk():
    b = BuddyAllocator(16)
    chunks = [b.alloc(s) for s in (1, 2, 4, 1, 8)]
    assert [c.offset for c in chunks] == [0, 2, 4, 1, 8]
    for chunk in (chunks[2], chunks[0], chunks[4], chunks[3]):
        b.free(chunk.offset)
        b.check()
    assert b.free_chunk_sizes() == [2, 4, 8]  # 1@0 + 1@1 merged; 2@2 still allocated
    b.free(chunks[1].offset)
    assert b.free_chunk_sizes() == [16]
    b.check()


def test_buddy_capacity_not_power_of_two_has_separate_regions():
    b = BuddyAllocator(12)
    assert (b.max_chunk_slots, b.free_chunk_sizes()) == (8, [4, 8])
    assert b.alloc(4) == Chunk(8, 4)  # smallest sufficient chunk: region 4@8
    assert b.alloc(8) == Chunk(0, 8)
    b.free(0)
    b.free(8)
    assert b.free_chunk_sizes() == [4, 8]  # regions never merge
    with pytest.raises(OutOfBlocks):
        b.alloc(9)
    b.check()


def test_buddy_external_fragmentation_fails_despite_enough_free_slots():
    b = BuddyAllocator(16)
    chunks = [b.alloc(4) for _ in range(4)]
    b.free(chunks[0].offset)
    b.free(chunks[2].offset)
    assert (b.free_slots, b.largest_free_chunk) == (8, 4)
    with pytest.raises(OutOfBlocks) as err:
        b.alloc(8)
    assert (err.value.requested, err.value.free) == (8, 8)
    assert isinstance(err.value, RuntimeError)
    b.check()


def test_buddy_exact_alloc_returns_trimmed_tail():
    b = BuddyAllocator(16)
    assert b.alloc(5, exact=True) == Chunk(0, 5)
    assert b.free_chunk_sizes() == [1, 2, 8]  # 1@5, 2@6, 8@8
    assert b.alloc(3, exact=True) == Chunk(8, 3)  # from 4@8; 1@11 goes back
    assert b.free_chunk_sizes() == [1, 1, 2, 4]
    b.check()
    b.free(0)
    b.free(8)
    assert b.free_chunk_sizes() == [16]
    b.check()


def test_buddy_min_chunk_and_argument_errors():
    b = BuddyAllocator(64, min_chunk_slots=8)
    assert b.alloc(3) == Chunk(0, 8)
    assert b.alloc(17, exact=True) == Chunk(32, 24)  # 17 -> multiple of 8; 8@56 returned
    assert b.free_chunk_sizes() == [8, 8, 16]
    b.check()
    with pytest.raises(ValueError, match="power of two"):
        BuddyAllocator(32, min_chunk_slots=3)
    with pytest.raises(ValueError, match="multiple"):
        BuddyAllocator(20, min_chunk_slots=8)
    with pytest.raises(ValueError, match="no allocated chunk"):
        b.free(8)
    with pytest.raises(ValueError):
        b.alloc(0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 40), st.booleans()), max_size=40))
def test_buddy_invariants_hold_under_random_alloc_free(ops):
    b = BuddyAllocator(100)
    held: list[Chunk] = []
    for do_alloc, size, exact in ops:
        if do_alloc or not held:
            try:
                held.append(b.alloc(size, exact=exact))
            except OutOfBlocks:
                assert b.largest_free_chunk < next_pow2(size)
        else:
            b.free(held.pop(size % len(held)).offset)
        b.check()
        assert b.free_slots + sum(c.size for c in held) == 100
    for chunk in held:
        b.free(chunk.offset)
    assert b.free_chunk_sizes() == [4, 32, 64]


def _three_requests(policy: ReservationPolicy) -> ContiguousAllocator:
    pool = ContiguousAllocator(64, policy, max_context_len=32)
    pool.reserve(0, 5, 4)  # final 9
    pool.reserve(1, 10, 7)  # final 17
    return pool


def test_max_policy_breakdown():
    pool = _three_requests(ReservationPolicy.MAX)
    assert pool.buddy.free_slots == 0
    assert not pool.can_reserve(2, 1)
    with pytest.raises(OutOfBlocks):
        pool.reserve(2, 2, 1)
    # tokens 5+10, reserved 4+7, internal (32-9)+(32-17)
    assert pool.breakdown(32) == WasteBreakdown(15, 11, 38, 0, 0)
    pool.set_length(0, 7)
    assert pool.breakdown(None) == WasteBreakdown(17, 9, 38, 0, 0)
    pool.release(0)
    assert pool.breakdown(32) == WasteBreakdown(10, 7, 15, 0, 32)
    pool.buddy.check()


def test_pow2_policy_breakdown():
    pool = _three_requests(ReservationPolicy.POW2)
    assert pool.reserve(2, 2, 1) == Chunk(16, 4)  # A=0+16, B=32+32; free 4@20, 8@24
    # tokens 5+10+2, reserved 4+7+1, internal (16-9)+(32-17)+(4-3)
    assert pool.breakdown(16) == WasteBreakdown(17, 12, 23, 12, 0)
    assert pool.breakdown(8) == WasteBreakdown(17, 12, 23, 4, 8)
    assert pool.breakdown(None) == WasteBreakdown(17, 12, 23, 0, 12)


def test_oracle_policy_breakdown():
    pool = _three_requests(ReservationPolicy.ORACLE)
    assert pool.reserve(2, 2, 1) == Chunk(12, 3)
    # free: 1@9 2@10 1@15 16@16 1@49 2@50 4@52 8@56 (35 slots); < 5: 11 slots
    assert pool.buddy.free_chunk_sizes() == [1, 1, 1, 2, 2, 4, 8, 16]
    assert pool.breakdown(5) == WasteBreakdown(17, 12, 0, 11, 24)
    pool.buddy.check()


def test_reservation_sizes_and_errors():
    pool = ContiguousAllocator(8192, ReservationPolicy.POW2, max_context_len=3000)
    assert pool.reservation_slots(1000, 500) == 2048
    assert pool.reservation_slots(2000, 500) == 3000  # capped at max context
    with pytest.raises(ValueError, match="max_context_len"):
        pool.reservation_slots(2000, 1001)
    small = ContiguousAllocator(16, ReservationPolicy.MAX, max_context_len=32)
    assert not small.fits_when_empty(1, 1)  # 32-slot reservation > 16-slot pool
    pool.reserve(7, 10, 5)
    with pytest.raises(ValueError, match="already"):
        pool.reserve(7, 10, 5)
    with pytest.raises(ValueError, match="outside"):
        pool.set_length(7, 16)
