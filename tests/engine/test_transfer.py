"""KV transfers sharing NICs max-min fairly: hand-computed timings, errors, and an event-loop
property over random flows (simkv.engine.transfer)."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.engine.transfer import TransferNet, max_min_rates
from simkv.kv.allocator import InvariantViolation


class Start(NamedTuple):
    flow_id: int
    src: int
    dst: int
    nbytes: int
    at_s: float
    latency_s: float


def drive(net: TransferNet, starts: list[Start]) -> dict[int, float]:
    """Run the net as an event loop would (wake-ups at ``next_event_s()`` or at the next
    start, ``check()`` after every step); each flow's finish time. Every wake-up starts a flow
    or processes at least one of the ≤ 2 events per flow, so a loop that makes no progress
    fails the step bound."""
    todo = sorted(starts, key=lambda s: (s.at_s, s.flow_id))
    finished: dict[int, float] = {}
    for _ in range(3 * len(todo) + 2):
        t = net.next_event_s()
        starting = bool(todo) and todo[0].at_s <= t
        if starting:
            t = todo[0].at_s
        for flow_id in net.advance(t):
            assert flow_id not in finished, f"flow {flow_id} finished twice"
            finished[flow_id] = t
        if starting:
            s = todo.pop(0)
            net.start(s.flow_id, s.src, s.dst, s.nbytes, s.at_s, s.latency_s)
        net.check()
        if not todo and net.active() == 0:
            return finished
    raise AssertionError("the event loop made no progress")


def test_a_lone_flow_takes_its_latency_plus_bytes_over_the_narrower_nic() -> None:
    net = TransferNet([50e9, 25e9], [12.5e9, 40e9])
    nbytes, start_s, latency_s = 3_221_225_472, 7.25, 0.6e-6
    finished = drive(net, [Start(4, 0, 1, nbytes, start_s, latency_s)])
    assert math.isclose(finished[4], start_s + latency_s + nbytes / 40e9, rel_tol=1e-12)
    assert net.sent_bytes == [nbytes, 0] and net.received_bytes == [0, nbytes]
    assert math.isclose(net.egress_busy_s[0], nbytes / 40e9, rel_tol=1e-9)
    assert net.ingress_busy_s == [0.0, net.egress_busy_s[0]]


@pytest.mark.parametrize("n", [1, 2, 5, 16])
def test_n_equal_flows_from_one_source_finish_together_at_n_times_the_time(n: int) -> None:
    net = TransferNet([10e9] * (n + 1), [10e9] * (n + 1))
    starts = [Start(k, 0, k + 1, 10**9, 0.0, 1e-6) for k in range(n)]
    finished = drive(net, starts)
    assert len(set(finished.values())) == 1
    assert math.isclose(finished[0], 1e-6 + n * 0.1, rel_tol=1e-12)
    assert math.isclose(net.egress_busy_s[0], n * 0.1, rel_tol=1e-9)


def test_unequal_nics_share_max_min_fairly() -> None:
    # egress 0: 10 B/s, egress 1: 4 B/s; ingress 1: 10 B/s, ingress 2: 6 B/s (others unused).
    # A 0→2 (30 B), B 1→2 (6 B), C 0→1 (70 B), all at t=0 without latency.
    # Filling from 0: shares per flow are egress0 10/2=5, egress1 4/1=4, ingress1 10/1=10,
    # ingress2 6/2=3. Ingress 2 is the bottleneck: A = B = 3. Egress 0 keeps 10-3 = 7 for C
    # alone (ingress 1 allows 10): C = 7. Egress 1 keeps 1 unused.
    # t=2: B done (6/3). A has 30-6 = 24 left, C 70-14 = 56. Now egress 0 is shared by A and
    # C: 10/2 = 5 each (ingress 2 alone would give A 6). A done at 2 + 24/5 = 6.8, when C has
    # 56-24 = 32 left; alone, C gets 10: done at 6.8 + 32/10 = 10.
    egress, ingress = [10.0, 4.0, 1.0], [1.0, 10.0, 6.0]
    assert max_min_rates([(0, 2), (1, 2), (0, 1)], egress, ingress) == [3.0, 3.0, 7.0]
    net = TransferNet(egress, ingress)
    finished = drive(
        net, [Start(0, 0, 2, 30, 0, 0), Start(1, 1, 2, 6, 0, 0), Start(2, 0, 1, 70, 0, 0)]
    )
    expected = {0: 6.8, 1: 2.0, 2: 10.0}
    assert all(math.isclose(finished[k], expected[k], rel_tol=1e-9) for k in expected)
    busy = (net.egress_busy_s, net.ingress_busy_s)
    for got, want in zip([*busy[0], *busy[1]], [10, 2, 0, 0, 10, 6.8], strict=True):
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)


def test_a_flow_starting_midway_slows_the_first() -> None:
    # A: 0→1, 100 B at 10 B/s from t=0. B: 0→2, 20 B, starts at t=5 with 1 s latency.
    # At t=6 A has 40 B left; they share egress 0 at 5 B/s each: B done at 6 + 20/5 = 10,
    # when A has 20 B left, which alone it sends in 2 s: A done at 12 (not 10).
    net = TransferNet([10.0] * 3, [10.0] * 3)
    net.start(0, 0, 1, 100, now=0.0, latency_s=0.0)
    assert net.advance(5.0) == []
    net.start(1, 0, 2, 20, now=5.0, latency_s=1.0)
    assert net.active() == 2 and net.next_event_s() == 6.0
    assert net.advance(6.0) == []
    assert math.isclose(net.next_event_s(), 10.0, rel_tol=1e-12)
    assert net.advance(11.0) == [1]
    assert net.advance(12.0) == [0] and net.active() == 0
    assert net.egress_busy_s[0] == 12.0 and net.ingress_busy_s == [0.0, 12.0, 4.0]


def test_finishes_during_start_come_back_from_the_next_advance_in_order() -> None:
    net = TransferNet([1.0, 1.0], [1.0, 1.0])
    net.start(5, 0, 1, 2, now=0.0, latency_s=0.0)
    net.start(3, 1, 0, 1, now=0.0, latency_s=0.0)
    net.start(9, 0, 0, 1, now=4.0, latency_s=0.0)  # 3 done at 1, 5 at 2, before t=4
    assert net.advance(4.0) == [3, 5]
    assert net.advance(5.0) == [9]


def test_a_flow_within_dust_of_its_end_finishes_at_the_next_event() -> None:
    # A sends 10 B at 1 B/s; B's latency ends 1e-7 s before A would finish, when A has 1e-7 B
    # left (below DONE_BYTES): A is done then, and does not share egress 0 with B.
    net = TransferNet([1.0, 1.0], [1.0, 1.0])
    net.start(0, 0, 1, 10, now=0.0, latency_s=0.0)
    net.start(1, 0, 0, 5, now=0.0, latency_s=10 - 1e-7)
    assert net.advance(10 - 1e-7) == [0]
    assert net.next_event_s() == 10 - 1e-7 + 5.0


def test_a_zero_byte_flow_finishes_after_its_latency() -> None:
    net = TransferNet([1e9, 1e9], [1e9, 1e9])
    net.start(7, 0, 1, 0, now=1.0, latency_s=0.25)
    assert net.next_event_s() == 1.25 and net.advance(1.2) == []
    assert net.advance(1.25) == [7] and net.active() == 0
    net.start(8, 1, 0, 0, now=2.0, latency_s=0.0)
    assert net.next_event_s() == 2.0 and net.advance(2.0) == [8]
    assert net.sent_bytes == [0, 0] and net.egress_busy_s == [0.0, 0.0]
    assert net.next_event_s() == math.inf


def test_time_never_runs_backwards() -> None:
    net = TransferNet([1.0], [1.0])
    net.advance(2.0)
    with pytest.raises(InvariantViolation, match="time runs forward"):
        net.advance(1.0)
    with pytest.raises(InvariantViolation):
        net.start(0, 0, 0, 10, now=1.5, latency_s=0.0)
    with pytest.raises(InvariantViolation):
        net.advance(math.nan)


def test_a_flow_id_is_unique_while_in_flight() -> None:
    net = TransferNet([1.0, 1.0], [1.0, 1.0])
    net.start(1, 0, 1, 10, now=0.0, latency_s=0.0)
    with pytest.raises(InvariantViolation, match="flow 1"):
        net.start(1, 1, 0, 10, now=0.0, latency_s=0.0)
    assert net.advance(10.0) == [1]
    net.start(1, 1, 0, 10, now=10.0, latency_s=0.0)  # reported, so the id is free again


@pytest.mark.parametrize(
    "args", [(0, 2, 1, 0.0, 0.0), (0, 1, -1, 0.0, 0.0), (0, 1, 1, 0.0, -1.0), (0, 1, 1.5, 0, 0)]
)
def test_bad_flows_are_refused(args: tuple[int, int, int, float, float]) -> None:
    with pytest.raises(ValueError):
        TransferNet([1.0, 1.0], [1.0, 1.0]).start(0, *args)


def test_check_catches_an_overloaded_nic() -> None:
    net = TransferNet([1.0, 1.0], [1.0, 1.0])
    net.start(0, 0, 1, 10, now=0.0, latency_s=0.0)
    net.advance(1.0)
    net.check()
    net._moving[0].rate = 2.0
    with pytest.raises(InvariantViolation, match="egress NIC 0"):
        net.check()


NICS = st.sampled_from([1e3, 2.5e9, 1e10, 5e10, 1.23e11])
FLOW = st.tuples(
    st.integers(0, 3),  # src (mod replicas)
    st.integers(0, 3),  # dst (mod replicas)
    st.one_of(st.just(0), st.integers(1, 10**4), st.integers(1, 10**10)),  # bytes
    st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0, 10)),  # start offset, s
    st.sampled_from([0.0, 0.6e-6, 2e-6, 1e-3]),  # latency, s
)


@settings(max_examples=150, deadline=None)
@given(
    replicas=st.integers(1, 4),
    nics=st.lists(st.tuples(NICS, NICS), min_size=4, max_size=4),
    flows=st.lists(FLOW, min_size=1, max_size=12),
    clock_s=st.sampled_from([0.0, 1e6, 1e9]),
)
def test_random_flows_all_finish_once_no_faster_than_alone_and_repeatably(
    replicas: int,
    nics: list[tuple[float, float]],
    flows: list[tuple[int, int, int, float, float]],
    clock_s: float,
) -> None:
    egress = [e for e, _ in nics[:replicas]]
    ingress = [i for _, i in nics[:replicas]]
    starts = [
        Start(k, src % replicas, dst % replicas, nbytes, clock_s + offset, latency)
        for k, (src, dst, nbytes, offset, latency) in enumerate(flows)
    ]
    net = TransferNet(egress, ingress)
    net.advance(clock_s)
    finished = drive(net, starts)
    assert sorted(finished) == [s.flow_id for s in starts]
    total = sum(s.nbytes for s in starts)
    assert sum(net.sent_bytes) == sum(net.received_bytes) == total
    dust_s = len(starts) * 1e-6  # bytes a flow may finish early by, over the slowest rate
    for s in starts:
        narrower = min(egress[s.src], ingress[s.dst])
        bound = s.at_s + s.latency_s + s.nbytes / narrower
        slack = 1e-9 * (bound - s.at_s) + 8 * math.ulp(bound) + dust_s / narrower
        assert finished[s.flow_id] >= bound - slack, s
    tick_s = 4 * len(starts) * math.ulp(max(finished.values()))  # rounding of the clock
    for nic in range(replicas):  # a NIC moves at most its capacity while busy
        for busy_s, bps, nbytes in (
            (net.egress_busy_s[nic], egress[nic], net.sent_bytes[nic]),
            (net.ingress_busy_s[nic], ingress[nic], net.received_bytes[nic]),
        ):
            assert (busy_s + tick_s) * bps >= nbytes * (1 - 1e-9) - 1e-6 * len(starts)
    again = TransferNet(egress, ingress)
    again.advance(clock_s)
    assert drive(again, starts) == finished


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
