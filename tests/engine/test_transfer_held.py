"""Held-back bytes on the TransferNet: released at once or at a rate, max-min fairness with
demands, hand-computed timings, errors and an event-loop property (simkv.engine.transfer)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.engine.transfer import TransferNet, max_min_rates
from simkv.kv.allocator import InvariantViolation


def test_max_min_with_demands_freezes_a_flow_at_its_demand() -> None:
    # egress 0 (10 B/s) carries A (demand 2 B/s) and B (no demand): A gets 2, B the other 8;
    # with A's demand above the 5 B/s fair share, both get 5
    egress, ingress = [10.0, 10.0, 10.0], [10.0, 10.0, 10.0]
    flows = [(0, 1), (0, 2)]
    assert max_min_rates(flows, egress, ingress, [2.0, math.inf]) == [2.0, 8.0]
    assert max_min_rates(flows, egress, ingress, [6.0, math.inf]) == [5.0, 5.0]


def test_a_held_flow_moves_nothing_and_finishes_only_once_released() -> None:
    # A: 0→1, 10 B, 4 of them held, 10 B/s, no latency. B: 0→2, 10 B from t=0, same egress.
    # A's 6 sendable bytes share egress 0 with B (5 B/s each): A's backlog empties at 1.2 s,
    # then B alone gets 10 B/s: 4 B left at 1.2, B done at 1.6. A has nothing to send (not
    # busy, no rate) until its 4 bytes are released at 3.0: done at 3.4.
    net = TransferNet([10.0] * 3, [10.0] * 3)
    net.start(0, 0, 1, 10, now=0.0, latency_s=0.0, held_back=4)
    net.start(1, 0, 2, 10, now=0.0, latency_s=0.0)
    assert net.advance(1.2) == [] and math.isclose(net.next_event_s(), 1.6)
    net.check()
    assert net.advance(3.0) == [1] and net.next_event_s() == math.inf
    assert net.held_bytes(0, 3.0) == 4.0 and net.active() == 1
    net.check()
    net.release(0, 3.0, 4)
    assert math.isclose(net.next_event_s(), 3.4)
    assert net.advance(3.4) == [0]
    assert net.sent_bytes == [20, 0, 0] and net.received_bytes == [0, 10, 10]
    assert math.isclose(net.egress_busy_s[0], 1.6 + 0.4) and math.isclose(
        net.ingress_busy_s[1], 1.2 + 0.4
    )


@pytest.mark.parametrize(
    ("feed_bps", "done_s"),
    [
        # released at 4 B/s from 0 to 10 (40 B), below the link's 10 B/s: the flow keeps up,
        # then the last 60 B released at 10 s take 6 s: done at 16
        (4.0, 16.0),
        # released at 20 B/s from 0 to 4 (80 B), faster than the link: 40 B moved by 4 s,
        # the last 20 B released at 4 s: 60 B left at 10 B/s, done at 10 (link-bound)
        (20.0, 10.0),
    ],
)
def test_a_release_rate_caps_the_flow_only_when_the_link_is_faster(
    feed_bps: float, done_s: float
) -> None:
    net = TransferNet([10.0, 10.0], [10.0, 10.0])
    net.start(0, 0, 1, 100, now=0.0, latency_s=0.0, held_back=100)
    net.release(0, 0.0, 0, rate_bps=feed_bps)
    stop_s = 10.0 if feed_bps < 10 else 4.0
    assert net.advance(stop_s) == []
    net.check()
    held = net.held_bytes(0, stop_s)
    assert math.isclose(held, 100 - feed_bps * stop_s)
    net.release(0, stop_s, held)
    assert net.held_bytes(0, stop_s) == 0.0
    assert math.isclose(net.next_event_s(), done_s)
    assert net.advance(done_s + 1e-9) == [0] and net.sent_bytes == [100, 0]


def test_releases_that_break_the_rules_raise() -> None:
    net = TransferNet([10.0, 10.0], [10.0, 10.0])
    net.start(0, 0, 1, 10, now=0.0, latency_s=1.0, held_back=5)
    with pytest.raises(InvariantViolation, match="latency"):
        net.release(0, 0.5, 1, rate_bps=1.0)
    with pytest.raises(InvariantViolation, match="held"):
        net.release(0, 0.5, 6)
    with pytest.raises(InvariantViolation, match="not in flight"):
        net.release(3, 0.5, 1)
    with pytest.raises(ValueError):
        net.start(1, 0, 1, 10, now=0.5, latency_s=0.0, held_back=11)
    net.release(0, 2.0, 0, rate_bps=1.0)
    with pytest.raises(InvariantViolation, match="more bytes than it held"):
        net.release(0, 8.0, 0)  # 6 s at 1 B/s would have released 6 of the 5 bytes


NICS = st.sampled_from([1e3, 2.5e9, 1e10, 5e10, 1.23e11])  # bytes/s, as in test_transfer.py
RELEASED = st.tuples(
    st.integers(0, 3),  # src (mod replicas)
    st.integers(0, 3),  # dst (mod replicas)
    st.integers(1, 10**9),  # bytes
    st.floats(0.01, 1),  # share held back at the start
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0.01, 2)), max_size=4),
)  # each release: (share of the held bytes at once, share released at a rate, seconds)


@settings(max_examples=100, deadline=None)
@given(
    replicas=st.integers(1, 4),
    nics=st.lists(st.tuples(NICS, NICS), min_size=4, max_size=4),
    flows=st.lists(RELEASED, min_size=1, max_size=8),
)
def test_random_releases_finish_every_flow_once_after_its_last_release(
    replicas: int,
    nics: list[tuple[float, float]],
    flows: list[tuple[int, int, int, float, list[tuple[float, float, float]]]],
) -> None:
    # every flow starts at 0 with part of its bytes held back; its releases (at once, then
    # at a rate until the next) never exceed what it holds, and at its end it releases the
    # rest (as simkv.engine.layerwise does at a prefill's end)
    egress = [e for e, _ in nics[:replicas]]
    ingress = [i for _, i in nics[:replicas]]
    net = TransferNet(egress, ingress)
    ops: list[tuple[float, int, float, float]] = []  # (time, flow, bytes at once, rate)
    last_s: dict[int, float] = {}
    for k, (src, dst, nbytes, held_share, releases) in enumerate(flows):
        held = held_share * nbytes
        net.start(k, src % replicas, dst % replicas, nbytes, 0.0, 0.0, held_back=held)
        t = 0.0
        for now_share, rate_share, span_s in releases:
            at_once = now_share * held / 2
            rate = rate_share * (held - at_once) / 2 / span_s
            ops.append((t, k, at_once, rate))
            held -= at_once + rate * span_s
            t += span_s
        ops.append((t, k, -1.0, 0.0))  # -1: the rest
        last_s[k] = t
    ops.sort()
    finished: dict[int, float] = {}
    for _ in range(20 * len(ops) + 10):
        t = min(net.next_event_s(), ops[0][0] if ops else math.inf)
        for flow_id in net.advance(t):
            assert flow_id not in finished
            finished[flow_id] = t
        while ops and ops[0][0] <= t:
            _, k, at_once, rate = ops.pop(0)
            rest = net.held_bytes(k, t)
            net.release(k, t, rest if at_once < 0 else min(at_once, rest), rate)
        net.check()
        if not ops and net.active() == 0:
            break
    assert sorted(finished) == list(range(len(flows)))
    for k, (src, _, nbytes, _, _) in enumerate(flows):
        assert finished[k] >= last_s[k]
        assert finished[k] >= nbytes / egress[src % replicas] * (1 - 1e-9) - 1e-6
    total = sum(f[2] for f in flows)
    assert sum(net.sent_bytes) == sum(net.received_bytes) == total
