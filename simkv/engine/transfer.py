"""KV transfers between replicas sharing their NICs: a fluid, max-min fair network.

Every replica has one egress and one ingress NIC (bytes/s each, one direction; the
:class:`simkv.config.links.LinkConfig` bandwidth). A flow from ``src`` to ``dst`` first waits
its latency, carrying nothing, then moves bytes through the egress NIC of ``src`` and the
ingress NIC of ``dst``. The moving flows share the NICs max-min fairly: the rates are the ones
progressive filling (water-filling) reaches, as Bertsekas & Gallager define max-min fairness
(*Data Networks*, 2nd ed., §6.5.2): no flow can go faster without slowing a flow that is no
faster than it. The fabric between the NICs is taken as non-blocking (a full-bisection fat tree).

Time moves only forward, driven by the caller's event loop: :meth:`TransferNet.next_event_s`
is the time of the next change (a latency ending or a flow finishing at the current rates) and
:meth:`TransferNet.advance` processes every change up to a time, recomputing the rates after
each. Rates change only at those events, so between them each flow's remaining bytes are a
straight line from its last anchor; the rates are recomputed only when the set of moving flows
changes, in O(flows × NICs).

Held-back bytes (layer-wise hand-overs): a flow may start with bytes not yet sendable, which
:meth:`TransferNet.release` makes sendable at once or at a rate (as the sender computes them).
A flow with a backlog (sendable bytes not moved) competes for the NICs; one with an empty
backlog and a release rate r asks for at most r (max-min fairness with demands); one with
neither moves nothing and loads no NIC. A flow finishes only when nothing is held.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from simkv.kv.allocator import InvariantViolation

__all__ = ["TransferNet", "max_min_rates"]

DONE_BYTES = 1e-6
"""Remaining bytes at or below which a flow is done, so float dust never keeps a flow alive."""
DONE_FRACTION = 1e-12
"""The same threshold relative to the flow's size (for flows of terabytes)."""
RATE_SLACK = 1e-9
"""Relative tolerance of :meth:`TransferNet.check`'s ``Σ rates ≤ capacity`` on every NIC."""


def max_min_rates(
    flows: Sequence[tuple[int, int]],
    egress_bps: Sequence[float],
    ingress_bps: Sequence[float],
    demands: Sequence[float] | None = None,
) -> list[float]:
    """Max-min fair rates (bytes/s) of ``flows`` given as ``(src, dst)``, by progressive
    filling (Bertsekas & Gallager, *Data Networks*, §6.5.2): the NIC whose residual capacity per
    unfrozen flow is least is the bottleneck; its flows get that share, which comes off the
    other NIC each of them uses; repeat. Ties go to the lower NIC (egress before ingress).
    With ``demands`` (bytes/s, ``inf``: none), a flow whose demand is at most the bottleneck's
    share is frozen at its demand first (ibid., max-min fairness with demands)."""
    n = len(egress_bps)
    residual = [*egress_bps, *ingress_bps]  # NIC r: egress r, or ingress r - n
    users: dict[int, set[int]] = {}
    for k, (src, dst) in enumerate(flows):
        users.setdefault(src, set()).add(k)
        users.setdefault(n + dst, set()).add(k)
    rates = [0.0] * len(flows)
    capped = sorted((d, k) for k, d in enumerate(demands or ()) if d < math.inf)
    while users:
        share, nic = min((residual[r] / len(ks), r) for r, ks in users.items())
        while capped and capped[0][1] not in users.get(flows[capped[0][1]][0], ()):
            capped.pop(0)  # frozen at its NICs' share already
        if capped and capped[0][0] <= share:
            demand, k = capped.pop(0)
            rates[k] = demand
            src, dst = flows[k]
            for r in (src, n + dst):
                residual[r] = max(0.0, residual[r] - demand)
                users[r].discard(k)
                if not users[r]:
                    del users[r]
            continue
        for k in users.pop(nic):
            rates[k] = share
            src, dst = flows[k]
            for other in (src, n + dst):
                if other != nic:
                    residual[other] = max(0.0, residual[other] - share)
                    users[other].discard(k)
                    if not users[other]:
                        del users[other]
    return rates


@dataclass(slots=True)
class _Flow:
    """One transfer. At ``anchor_s`` it had ``remaining`` bytes left to move, ``held`` of them
    not yet sendable; since then it has moved at ``rate`` and ``feed`` bytes/s were released.
    ``done_s``: when its backlog empties at these rates (it finishes then if nothing is held;
    inf while in its latency)."""

    src: int
    dst: int
    nbytes: int
    ready_s: float
    anchor_s: float
    remaining: float
    held: float = 0.0
    feed: float = 0.0
    rate: float = 0.0
    done_s: float = math.inf

    def remaining_at(self, t: float) -> float:
        return self.remaining - self.rate * (t - self.anchor_s)

    def held_at(self, t: float) -> float:
        return max(0.0, self.held - self.feed * (t - self.anchor_s)) if self.feed else self.held

    def anchor(self, t: float) -> None:
        """Carry the bytes left and held to ``t`` (not before ``anchor_s``)."""
        if self.anchor_s < t:
            self.remaining = max(0.0, self.remaining_at(t))
            self.held = self.held_at(t)
            self.anchor_s = t

    def finishable(self) -> bool:
        """Whether its remaining bytes are all sendable, and stay so."""
        return self.held == 0 and self.feed == 0

    def done_below(self) -> float:
        """Remaining bytes at or below which this flow is done."""
        return max(DONE_BYTES, DONE_FRACTION * self.nbytes)


class TransferNet:
    """Flows between replicas sharing egress and ingress NICs, max-min fair.

    Invariants (verified by :meth:`check`): every flow in flight is either in its latency or
    moving, never both; on every NIC the moving flows' rates sum to at most its capacity; no
    flow has negative remaining bytes. ``sent_bytes[src]`` and ``received_bytes[dst]`` count a
    flow's whole size when it finishes; ``egress_busy_s`` and ``ingress_busy_s`` the time each
    NIC had at least one flow moving bytes.

    A flow is done when its remaining bytes reach ``max(DONE_BYTES, DONE_FRACTION × nbytes)``
    or when time reaches the ``done_s`` its current rate predicts, whichever is first: so
    :meth:`advance` to :meth:`next_event_s` always finishes or starts something. Flows that
    finish while :meth:`start` moves the clock are returned by the next :meth:`advance` (call
    ``advance(now)`` before ``start(..., now)`` to have every finish at the time it happened).
    """

    def __init__(self, egress_bps: list[float], ingress_bps: list[float]) -> None:
        if not egress_bps or len(egress_bps) != len(ingress_bps):
            raise ValueError("give one egress and one ingress bandwidth per replica")
        if not all(0 < bps < math.inf for bps in (*egress_bps, *ingress_bps)):
            raise ValueError("every NIC bandwidth is a positive finite number of bytes/s")
        self._egress = tuple(float(bps) for bps in egress_bps)
        self._ingress = tuple(float(bps) for bps in ingress_bps)
        n = len(egress_bps)
        self.sent_bytes = [0] * n
        self.received_bytes = [0] * n
        self.egress_busy_s = [0.0] * n
        self.ingress_busy_s = [0.0] * n
        self._now = 0.0
        self._flows: dict[int, _Flow] = {}
        self._waiting: list[tuple[float, int]] = []  # heap of (ready_s, flow id)
        self._moving: dict[int, _Flow] = {}
        self._next_done_s = math.inf
        self._busy_src: list[int] = []
        self._busy_dst: list[int] = []
        self._unreported: list[int] = []

    def start(
        self,
        flow_id: int,
        src: int,
        dst: int,
        nbytes: int,
        now: float,
        latency_s: float,
        held_back: float = 0,
    ) -> None:
        """Advance to ``now``, then send ``nbytes`` from ``src`` to ``dst``: nothing moves
        for ``latency_s``, then the flow competes for the NICs; ``held_back`` of the bytes
        are not sendable until :meth:`release` releases them."""
        n = len(self._egress)
        if not (0 <= src < n and 0 <= dst < n):
            raise ValueError(f"replicas are 0..{n - 1}, got {src} -> {dst}")
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"nbytes is an int >= 0, got {nbytes!r}")
        if not 0 <= latency_s < math.inf:
            raise ValueError(f"latency_s is finite and >= 0, got {latency_s!r}")
        if not 0 <= held_back <= nbytes:
            raise ValueError(f"held_back is within 0..{nbytes} bytes, got {held_back!r}")
        if flow_id in self._flows or flow_id in self._unreported:
            raise InvariantViolation(f"flow {flow_id} is already in flight or unreported")
        self._run_until(now)
        ready_s = now + latency_s
        flow = _Flow(src, dst, nbytes, ready_s, ready_s, float(nbytes), float(held_back))
        self._flows[flow_id] = flow
        heapq.heappush(self._waiting, (ready_s, flow_id))

    def release(self, flow_id: int, now: float, nbytes: float, rate_bps: float = 0.0) -> None:
        """Advance to ``now``; make ``nbytes`` of flow ``flow_id``'s held-back bytes sendable
        now, and from now on release more at ``rate_bps`` (until the next call; 0 stops).
        A release rate needs the flow past its latency (or at its end, now); releasing more
        than is held raises :class:`InvariantViolation`, and so does a rate that would have."""
        if not (0 <= nbytes < math.inf and 0 <= rate_bps < math.inf):
            raise ValueError(f"release bytes and rate are finite and >= 0: {nbytes}, {rate_bps}")
        self._run_until(now)
        flow = self._flows.get(flow_id)
        if flow is None:
            raise InvariantViolation(f"flow {flow_id} is not in flight")
        if flow.anchor_s <= now:
            if flow.feed and flow.held - flow.feed * (now - flow.anchor_s) < -flow.done_below():
                raise InvariantViolation(f"flow {flow_id} released more bytes than it held")
            flow.anchor(now)
        elif rate_bps > 0:
            raise InvariantViolation(f"flow {flow_id} is released at a rate in its latency")
        held = flow.held - nbytes
        if held < -flow.done_below():
            raise InvariantViolation(f"flow {flow_id}: {nbytes} bytes released, {flow.held} held")
        flow.held = held if held > flow.done_below() else 0.0
        flow.feed = float(rate_bps)
        if flow_id in self._moving:
            self._process_events(now, external=True)

    def held_bytes(self, flow_id: int, now: float) -> float:
        """Flow ``flow_id``'s bytes still held back at ``now`` (its last anchor or later)."""
        return self._flows[flow_id].held_at(now)

    def next_event_s(self) -> float:
        """Time of the next latency ending or flow finishing (may be now; inf if none)."""
        ready_s = self._waiting[0][0] if self._waiting else math.inf
        return min(ready_s, self._next_done_s)

    def advance(self, now: float) -> list[int]:
        """Process every event up to ``now`` in time order; the flows finished by ``now`` and
        not yet returned, in (finish time, flow id) order."""
        self._run_until(now)
        finished, self._unreported = self._unreported, []
        return finished

    def unreported(self) -> bool:
        """Whether flows finished (as :meth:`start` moved the clock) that no
        :meth:`advance` has returned yet."""
        return bool(self._unreported)

    def active(self) -> int:
        """Flows in flight, in their latency or moving."""
        return len(self._flows)

    def check(self) -> None:
        """Raise :class:`InvariantViolation` if a NIC carries more than its capacity, a flow
        has negative remaining bytes, or a flow is both waiting and moving (or neither)."""
        waiting = {flow_id for _, flow_id in self._waiting}
        if waiting & set(self._moving) or waiting | set(self._moving) != set(self._flows):
            raise InvariantViolation("every flow in flight is either waiting or moving")
        for nics, capacities, side in ((0, self._egress, "egress"), (1, self._ingress, "ingress")):
            load = [0.0] * len(capacities)
            for flow in self._moving.values():
                load[(flow.src, flow.dst)[nics]] += flow.rate
            for nic, (used, capacity) in enumerate(zip(load, capacities, strict=True)):
                if used > capacity * (1 + RATE_SLACK):
                    raise InvariantViolation(f"{side} NIC {nic}: {used} B/s > {capacity} B/s")
        for flow_id, flow in self._moving.items():
            left = flow.remaining_at(self._now)
            idle = not flow.feed and flow.remaining - flow.held <= flow.done_below()
            if (flow.rate <= 0 and not idle) or flow.remaining < 0 or left < -flow.done_below():
                raise InvariantViolation(f"flow {flow_id}: {flow.rate} B/s, {left} bytes left")
            if not 0 <= flow.held <= flow.remaining + flow.done_below():
                raise InvariantViolation(f"flow {flow_id}: {flow.held} of {left} bytes held")

    def _run_until(self, now: float) -> None:
        if not self._now <= now < math.inf:
            raise InvariantViolation(f"time runs forward: asked for {now} s at {self._now} s")
        while (t := self.next_event_s()) <= now:
            self._move_to(t)
            self._process_events(t)
        self._move_to(now)

    def _move_to(self, t: float) -> None:
        """Move the clock to ``t``, counting busy time; bytes follow from the anchors."""
        elapsed = t - self._now
        for nic in self._busy_src:
            self.egress_busy_s[nic] += elapsed
        for nic in self._busy_dst:
            self.ingress_busy_s[nic] += elapsed
        self._now = t

    def _process_events(self, t: float, *, external: bool = False) -> None:
        """Finish the flows done by ``t``, let the flows whose latency ends at ``t`` move, and
        recompute the rates if the moving set changed (or a release changed a flow:
        ``external``). Called only at an event, so something must change (else the clock would
        stay at ``t`` forever)."""
        finished: list[int] = []
        changed = external
        for flow_id, flow in self._moving.items():
            if flow.finishable():
                if flow.done_s <= t or flow.remaining_at(t) <= flow.done_below():
                    finished.append(flow_id)
            elif flow.rate > flow.feed and (
                flow.done_s <= t or flow.remaining_at(t) - flow.held_at(t) <= flow.done_below()
            ):
                flow.anchor(t)
                flow.remaining = flow.held  # its backlog emptied (within dust): it waits
                changed = True
        for flow_id in finished:
            del self._moving[flow_id]
        changed = changed or bool(finished)
        while self._waiting and self._waiting[0][0] <= t:
            _, flow_id = heapq.heappop(self._waiting)
            flow = self._flows[flow_id]
            if flow.finishable() and flow.remaining <= flow.done_below():
                finished.append(flow_id)
            else:
                self._moving[flow_id] = flow
                changed = True
        if not finished and not changed:
            raise InvariantViolation(f"an event at {t} s neither finished nor started a flow")
        for flow_id in sorted(finished):
            flow = self._flows.pop(flow_id)
            self.sent_bytes[flow.src] += flow.nbytes
            self.received_bytes[flow.dst] += flow.nbytes
            self._unreported.append(flow_id)
        if changed:
            self._recompute(t)

    def _recompute(self, t: float) -> None:
        """Re-anchor every moving flow at ``t`` and give each flow that has bytes to send its
        max-min fair rate (at most its release rate when its backlog is empty)."""
        flows: list[_Flow] = []
        demands: list[float] = []
        for flow in self._moving.values():
            flow.anchor(t)
            backlog = flow.remaining - flow.held
            if backlog > flow.done_below() or flow.finishable():
                demands.append(math.inf)
            elif flow.feed > 0:
                demands.append(flow.feed)
            else:  # nothing sendable: it moves nothing until a release
                flow.rate, flow.done_s = 0.0, math.inf
                continue
            flows.append(flow)
        pairs = [(flow.src, flow.dst) for flow in flows]
        capped = any(d < math.inf for d in demands)
        rates = max_min_rates(pairs, self._egress, self._ingress, demands if capped else None)
        for flow, rate in zip(flows, rates, strict=True):
            flow.rate = rate
            gain = rate - flow.feed  # (rate - 0.0 is rate: a flow without releases as before)
            backlog = flow.remaining - flow.held
            flow.done_s = t + max(0.0, backlog) / gain if gain > 0 else math.inf
        self._next_done_s = min((flow.done_s for flow in flows), default=math.inf)
        self._busy_src = sorted({flow.src for flow in flows})
        self._busy_dst = sorted({flow.dst for flow in flows})
