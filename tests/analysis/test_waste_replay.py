"""Pool replay: hand-computed runs, conservation at every iteration, the schemes' ordering."""

import numpy as np
import pytest

from simkv.analysis.waste_replay import replay_contiguous, replay_paged
from simkv.kv.contiguous import ReservationPolicy
from simkv.kv.waste import WasteBreakdown


def _record() -> tuple[list[WasteBreakdown], object]:
    seen: list[WasteBreakdown] = []
    return seen, lambda it, w: seen.append(w)


def test_contiguous_single_request_drifts_from_reservation_to_tokens():
    seen, observe = _record()
    result = replay_contiguous(
        np.array([1]),
        np.array([3]),
        policy=ReservationPolicy.MAX,
        pool_slots=4,
        max_context_len=4,
        on_iteration=observe,
    )
    assert seen == [
        WasteBreakdown(1, 3, 0, 0, 0),
        WasteBreakdown(2, 2, 0, 0, 0),
        WasteBreakdown(3, 1, 0, 0, 0),
    ]
    assert (result.iterations, result.requests) == (3, 1)
    assert result.slot_iterations == WasteBreakdown(6, 6, 0, 0, 0)


def test_contiguous_max_hand_computed():
    # pool 8 = two 4-slot reservations. it0: r0 (1+2), r1 (2+1) admitted, r2 waits (demand 4,
    # no free chunk). r1 leaves after it0; it1: r2 admitted, r0 at length 2.
    seen, observe = _record()
    result = replay_contiguous(
        np.array([1, 2, 1]),
        np.array([2, 1, 1]),
        policy=ReservationPolicy.MAX,
        pool_slots=8,
        max_context_len=4,
        on_iteration=observe,
    )
    assert seen == [WasteBreakdown(3, 3, 2, 0, 0), WasteBreakdown(3, 2, 3, 0, 0)]
    assert result.slot_iterations == WasteBreakdown(6, 5, 5, 0, 0)
    assert (result.scheme, result.block_size, result.iterations) == ("max", None, 2)


def test_contiguous_external_fragmentation_blocks_the_head():
    # pool 16: r0 takes 8@0 (pow2 of 5), r1 takes 4@8, leaving 4@12; r2 needs 8 -> the 4 free
    # slots are external fragmentation while it waits. Internal: 8 - 5 (pow2 rounding).
    seen, observe = _record()
    replay_contiguous(
        np.array([4, 3, 6]),
        np.array([1, 1, 2]),
        policy=ReservationPolicy.POW2,
        pool_slots=16,
        max_context_len=16,
        on_iteration=observe,
    )
    assert seen[0] == WasteBreakdown(7, 2, 3, 4, 0)
    assert seen[1] == WasteBreakdown(6, 2, 0, 0, 8)


def test_paged_hand_computed_with_preemption():
    # 4 blocks of 2. it0: r0 (3 tokens, 2 blocks), r1 (2 tokens, 1 block). r1 takes the last
    # block at its step; it1: r0 needs a block -> preempts r1 (newest), then finishes.
    # it2: r1 re-admitted with its 3 tokens and finishes.
    seen, observe = _record()
    result = replay_paged(
        np.array([3, 2]), np.array([2, 2]), pool_slots=8, block_size=2, on_iteration=observe
    )
    assert seen == [
        WasteBreakdown(5, 1, 0, 0, 2),
        WasteBreakdown(7, 1, 0, 0, 0),
        WasteBreakdown(3, 1, 0, 0, 4),
    ]
    assert result.slot_iterations == WasteBreakdown(15, 3, 0, 0, 6)
    assert (result.preemptions, result.iterations, result.requests) == (1, 3, 2)


def test_paged_trailing_block_slack_is_internal_fragmentation():
    seen, observe = _record()
    replay_paged(np.array([1]), np.array([1]), pool_slots=8, block_size=4, on_iteration=observe)
    assert seen == [WasteBreakdown(1, 1, 2, 0, 4)]


def test_requests_that_can_never_fit_are_skipped():
    prompt, output = np.array([10, 30, 5]), np.array([5, 10, 1])  # finals 15, 40, 6
    result = replay_contiguous(
        prompt, output, policy=ReservationPolicy.ORACLE, pool_slots=32, max_context_len=64
    )
    assert (result.requests, result.skipped_requests) == (2, 1)
    result = replay_contiguous(
        prompt, output, policy=ReservationPolicy.MAX, pool_slots=32, max_context_len=64
    )
    assert (result.requests, result.skipped_requests) == (0, 3)
    result = replay_paged(prompt, output, pool_slots=32, block_size=4)
    assert (result.requests, result.skipped_requests) == (2, 1)
    with pytest.raises(ValueError, match="multiple"):
        replay_paged(prompt, output, pool_slots=30, block_size=4)


def _tiny_trace() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.integers(4, 31, 60), rng.integers(4, 31, 60)


def test_conservation_every_iteration_and_scheme_ordering():
    prompt, output = _tiny_trace()
    token_frac = {}
    for policy in [*ReservationPolicy, None]:
        seen, observe = _record()
        if policy is None:
            result = replay_paged(
                prompt, output, pool_slots=256, block_size=4, on_iteration=observe
            )
        else:
            result = replay_contiguous(
                prompt,
                output,
                policy=policy,
                pool_slots=256,
                max_context_len=64,
                on_iteration=observe,
            )
        assert len(seen) == result.iterations
        assert all(w.total_slots == 256 for w in seen)
        # the fast path (event-driven / running totals) equals the per-iteration recomputation
        assert sum(seen, WasteBreakdown.zero()) == result.slot_iterations
        assert result.requests == 60
        token_frac[result.scheme] = result.slot_iterations.fractions()["token_states"]
    assert token_frac["paged"] > token_frac["oracle"] > token_frac["pow2"] > token_frac["max"]
