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
