"""WasteBreakdown arithmetic and the paged five-way split."""

import numpy as np
import pytest

from simkv.kv.waste import CATEGORIES, WasteBreakdown, paged_breakdown


def test_breakdown_totals_fractions_bytes():
    w = WasteBreakdown(
        token_slots=5, reserved_slots=1, internal_frag_slots=2, external_frag_slots=0, free_slots=2
    )
    assert w.total_slots == 10
    assert w.fractions() == {
        "token_states": 0.5,
        "reservation": 0.1,
        "internal_frag": 0.2,
        "external_frag": 0.0,
        "free": 0.2,
    }
    assert list(w.fractions()) == list(CATEGORIES)
    assert w.to_bytes(1024) == {
        "token_states": 5120,
        "reservation": 1024,
        "internal_frag": 2048,
        "external_frag": 0,
        "free": 2048,
    }


def test_breakdown_add_and_zero():
    a = WasteBreakdown(1, 2, 3, 4, 5)
    b = WasteBreakdown(10, 20, 30, 40, 50)
    assert a + b == WasteBreakdown(11, 22, 33, 44, 55)
    assert sum([a, b], WasteBreakdown.zero()) == WasteBreakdown(11, 22, 33, 44, 55)
    assert (a + b).fractions()["free"] == 55 / 165


def test_breakdown_rejects_bad_values():
    with pytest.raises(ValueError, match="reservation"):
        WasteBreakdown(1, -1, 0, 0, 0)
    with pytest.raises(ValueError, match="undefined"):
        WasteBreakdown.zero().fractions()
    with pytest.raises(ValueError):
        WasteBreakdown(1, 0, 0, 0, 0).to_bytes(0)


def test_paged_breakdown_exact():
    # block 4, pool 10 blocks; per sequence (length, final, blocks):
    # (5, 9, 2): held 8 -> reserved 3, internal 0
    # (3, 3, 1): held 4 -> reserved 0, internal 1 (trailing-block slack)
    # (8, 8, 2): held 8 -> reserved 0, internal 0
    # (1, 2, 1): held 4 -> reserved 1, internal 2
    w = paged_breakdown(
        np.array([5, 3, 8, 1]),
        np.array([9, 3, 8, 2]),
        np.array([2, 1, 2, 1]),
        block_size=4,
        total_blocks=10,
    )
    assert w == WasteBreakdown(17, 4, 3, 0, 16)
    assert w.total_slots == 40


def test_paged_breakdown_empty_pool_and_lists():
    assert paged_breakdown([], [], [], block_size=16, total_blocks=3) == WasteBreakdown(
        0, 0, 0, 0, 48
    )


@pytest.mark.parametrize(
    ("lengths", "finals", "blocks", "match"),
    [
        ([5], [9], [1], "length"),  # 5 tokens in a 4-slot block
        ([5], [4], [2], "length"),  # wrote past its final length
        ([1, 1], [1, 1], [6, 5], "pool"),  # 11 blocks held in a 10-block pool
        ([1], [1, 2], [1], "shape"),
    ],
)
def test_paged_breakdown_rejects_inconsistent_state(lengths, finals, blocks, match):
    with pytest.raises(ValueError, match=match):
        paged_breakdown(lengths, finals, blocks, block_size=4, total_blocks=10)
