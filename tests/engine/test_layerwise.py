"""Layer-wise releases from prefill steps, hand-computed on a bare TransferNet
(simkv.engine.layerwise); the fleet-level scenarios are in tests/engine/test_disagg.py."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, cast

import pytest

from simkv.engine.layerwise import LayerFeed
from simkv.engine.request.plan import StepPlan
from simkv.engine.transfer import TransferNet
from simkv.kv.allocator import InvariantViolation


def _step(req_id: int, computed: int, num_new: int) -> StepPlan:
    plan = StepPlan()
    plan.seqs.append(cast(Any, SimpleNamespace(req_id=req_id, num_computed=computed)))
    plan.num_new.append(num_new)
    return plan


def test_a_flow_reserved_mid_step_skipping_a_cached_prefix() -> None:
    # 1 byte per token, 4 layers, a link of 100 B/s. Request 7 has 12 prompt positions, the
    # decode side caches 4: the flow carries 8 bytes. Step 1 computes [0, 8) from 0 to 8 s
    # (4 of them carried: 3/4 × 4 B over 8 s = 0.375 B/s), step 2 [8, 12) from 8 to 12 s
    # (3/4 × 4 B over 4 s = 0.75 B/s). Reserved at 2 s: 0.75 B sendable, 7.25 held; the link
    # catches up at once. At 8 s the last layer of step 1 (1 B) is released, 4 B stay held;
    # at 12 s the last layer of step 2 (1 B) is released, and leaves by 12.01 s.
    net = TransferNet([100.0, 100.0], [100.0, 100.0])
    changes: list[float] = []
    feed = LayerFeed(net, 1, 4, lambda: changes.append(net.next_event_s()))
    first, second = _step(7, 0, 8), _step(7, 8, 4)
    feed.started(first, 0.0, 8.0)
    assert changes == []  # no flow yet: nothing to tell
    feed.start(7, 0, 1, 4, 12, 2.0)
    assert math.isclose(net.held_bytes(7, 2.0), 7.25)
    assert math.isclose(net.next_event_s(), 2.0 + 0.75 / (100 - 0.375))
    assert net.advance(8.0) == []
    net.check()
    assert math.isclose(net.held_bytes(7, 8.0), 5.0)
    feed.ended(first, 8.0)
    assert math.isclose(net.held_bytes(7, 8.0), 4.0)
    feed.started(second, 8.0, 12.0)
    assert net.advance(12.0) == []
    assert math.isclose(net.held_bytes(7, 12.0), 1.0)
    feed.ended(second, 12.0)
    assert net.held_bytes(7, 12.0) == 0.0
    assert math.isclose(net.next_event_s(), 12.01)
    assert net.advance(12.01) == [7] and net.sent_bytes == [8, 0]
    feed.finished(7)
    # a recomputed step (after a preemption) sends nothing twice, and ends no flow early
    feed.started(_step(9, 0, 8), 20.0, 28.0)
    feed.ended(_step(9, 0, 8), 28.0)
    feed.started(_step(9, 0, 8), 30.0, 38.0)
    feed.start(9, 0, 1, 0, 8, 31.0)
    assert net.held_bytes(9, 31.0) == 0.0  # all 8 made before: nothing held back
    assert net.advance(31.08) == [9]


def test_a_flow_may_not_end_during_its_prefill_step() -> None:
    net = TransferNet([1.0, 1.0], [1.0, 1.0])
    feed = LayerFeed(net, 1, 4, lambda: None)
    feed.started(_step(3, 0, 8), 0.0, 8.0)
    feed.start(3, 0, 1, 0, 8, 0.0)
    with pytest.raises(InvariantViolation, match="before its prefill ended"):
        feed.finished(3)
    with pytest.raises(InvariantViolation, match="ends at"):
        feed.ended(_step(3, 0, 8), 7.0)
