"""PagedKV reports a broken running sum as an ``InvariantViolation`` naming it (never a bare
``assert``, which vanishes under ``python -O``)."""

from __future__ import annotations

import pytest

from simkv.engine.memory.paged import PagedKV
from simkv.engine.request.seq import Seq
from simkv.kv.allocator import InvariantViolation


@pytest.mark.parametrize(
    "name", ["written_tokens", "internal_slots", "fork_dup_tokens", "shared_tokens"]
)
def test_check_names_the_broken_sum(name: str) -> None:
    kv = PagedKV(8, 4, prefix_caching="hash")
    kv.check([])
    setattr(kv.sums, name, 4)
    with pytest.raises(InvariantViolation, match=f"PagedKV.{name} is 4, recomputed 0"):
        kv.check([])


def test_a_swap_without_a_pool_is_refused() -> None:
    kv = PagedKV(8, 4)
    with pytest.raises(InvariantViolation, match="swap_space_gib"):
        kv.swap.free_swapped(Seq(0, 0.0, 4, 4, 0, 4))
