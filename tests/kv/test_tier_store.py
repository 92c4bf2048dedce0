"""An offload tier's blocks (simkv.kv.tier_store) and its eviction policies
(simkv.kv.tier_policies), hand-computed, plus hypothesis for the invariants."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.kv.errors import InvariantViolation
from simkv.kv.tier_policies import ArcPolicy, FrequencyPolicy, LruPolicy, TierPolicy, make_policy
from simkv.kv.tier_store import TierStore


class FifoPolicy:
    """The worked example of a new policy: the oldest stored block leaves first, hits aside."""

    def __init__(self) -> None:
        self._order: OrderedDict[int, None] = OrderedDict()

    def add(self, key: int, clock: int) -> None:
        self._order[key] = None

    def hit(self, key: int, clock: int) -> None:
        pass

    def remove(self, key: int) -> None:
        del self._order[key]

    def victims(self) -> Iterator[int]:
        return iter(self._order)


def _filled(policy: TierPolicy, keys: list[int], capacity: int = 3) -> TierStore:
    store = TierStore(capacity, policy)
    placed, evicted = store.begin_store(keys)
    store.finish_store(placed)
    assert not evicted
    return store


def _hit(store: TierStore, key: int) -> None:
    store.hold([key])
    store.release([key])


def test_lru_evicts_least_recently_stored_or_hit() -> None:
    store = _filled(LruPolicy(), [1, 2, 3])
    _hit(store, 1)  # order now 2, 3, 1
    placed, evicted = store.begin_store([4, 5])
    assert placed == [4, 5] and evicted == [2, 3]
    assert store.ready(1) and not store.ready(2) and not store.ready(4)  # 4 is pending


def test_fifo_example_ignores_hits() -> None:
    store = _filled(FifoPolicy(), [1, 2, 3])
    _hit(store, 1)
    assert store.begin_store([4]) == ([4], [1])


def test_arc_keeps_blocks_hit_twice_and_learns_from_ghosts() -> None:
    store = _filled(ArcPolicy(3), [1, 2, 3])
    _hit(store, 1)  # 1 moves to T2 (frequent); T1 = 2, 3
    assert store.begin_store([4]) == ([4], [2])  # T1 (2 > p = 0) gives its oldest
    store.finish_store([4])
    policy = store.policy
    assert isinstance(policy, ArcPolicy)
    # 2 comes back from the ghost list B1: T1's target grows and 2 goes straight to T2
    placed, evicted = store.begin_store([2])
    assert placed == [2] and evicted == [3] and policy.p == 1.0
    store.finish_store([2])
    # T1 = [4], T2 = [1, 2], p = 1: T1 is not above its target, so T2's oldest leaves
    assert store.begin_store([5]) == ([5], [1])


def test_frequency_keeps_the_hit_block_and_decays_with_the_clock() -> None:
    store = _filled(FrequencyPolicy(), [1, 2, 3])  # all stored at step 0: score 0
    _hit(store, 2)  # score 1
    assert store.begin_store([4])[1] == [1]  # lowest score, oldest first
    store.finish_store([4])
    store.clock = 5  # five steps on: a new block scores 5, above 2's doubled-and-decayed 1
    assert store.begin_store([5])[1] == [3]
    store.finish_store([5])
    assert store.begin_store([6])[1] == [4]  # count 1 at step 0, below 2's count 2 at step 0
    store.finish_store([6])
    assert store.begin_store([7])[1] == [2]  # 5 and 6 (count 1 at step 5) outrank it now


def test_pending_and_held_blocks_never_leave() -> None:
    store = TierStore(2, LruPolicy())
    placed, _ = store.begin_store([1, 2])
    assert store.begin_store([3]) == ([], [])  # both pending: nothing to evict, dropped
    assert store.dropped == 1
    store.finish_store(placed)
    store.hold([1])
    assert store.begin_store([3]) == ([3], [2])  # 1 is held (being loaded)
    store.release([1])
    store.check()


def test_run_length_stops_at_the_first_block_not_ready() -> None:
    store = TierStore(4, LruPolicy())
    store.finish_store(store.begin_store([10, 11])[0])
    store.begin_store([12])  # pending
    assert store.run_length([10, 11, 12, 13], 0, 4) == 2
    assert store.run_length([10, 11, 12, 13], 1, 4) == 1
    assert store.run_length([9, 10], 0, 2) == 0


def test_misuse_raises_named_errors() -> None:
    store = TierStore(2, LruPolicy())
    with pytest.raises(InvariantViolation):
        store.finish_store([7])
    with pytest.raises(InvariantViolation):
        store.hold([7])
    with pytest.raises(InvariantViolation):
        TierStore(0, LruPolicy())
    with pytest.raises(ValueError, match="unknown tier eviction policy"):
        make_policy("mru", 4)


_OPS = st.lists(
    st.tuples(st.sampled_from(["store", "finish", "load", "tick"]), st.lists(st.integers(0, 20))),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops=_OPS, policy=st.sampled_from(["lru", "arc", "frequency"]), capacity=st.integers(1, 8))
def test_invariants_hold_under_any_operations(
    ops: list[tuple[str, list[int]]], policy: str, capacity: int
) -> None:
    store = TierStore(capacity, make_policy(policy, capacity))
    pending: list[int] = []
    for op, keys in ops:
        if op == "store":
            placed, evicted = store.begin_store(keys)
            assert not set(evicted) & set(pending)  # a pending block never leaves
            pending += placed
        elif op == "finish" and pending:
            store.finish_store(pending)
            pending = []
        elif op == "load":
            ready = [k for k in dict.fromkeys(keys) if store.ready(k)]
            store.hold(ready)
            store.release(ready)
        else:
            store.clock += 1
        store.check()
        assert store.used <= capacity


def test_a_pinned_block_stays_until_its_pin_ends() -> None:
    store = _filled(LruPolicy(), [1, 2, 3])
    store.pin([1, 2], until_s=5.0)
    assert store.begin_store([4]) == ([4], [3])  # 1 and 2 are pinned: 3 leaves
    store.finish_store([4])
    store.pin([4], until_s=9.0)
    assert store.begin_store([5]) == ([], [])  # every block pinned: the store is dropped
    assert store.dropped == 1
    store.now_s = 5.0  # the pins of 1 and 2 end
    assert store.begin_store([5]) == ([5], [1])
    store.check()
