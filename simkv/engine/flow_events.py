"""The SimPy side of a :class:`~simkv.engine.transfer.TransferNet`: one pending event at the
net's next change (a latency ending or a flow finishing), none per byte.

Every owner of a net (the prefill/decode transfers, :mod:`simkv.engine.disagg`; the KV tiers'
loads and stores, :mod:`simkv.engine.tier_net`) calls :meth:`FlowEvents.changed` after it starts
or releases a flow; when the event fires, the flows finished by then go to its ``on_done`` in
(finish time, flow id) order, and the next event is set. A newer event makes older ones stale,
so at most one is live.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from simkv.engine.transfer import TransferNet


class Event(Protocol):
    """A SimPy event as the net uses it: callbacks run when it fires."""

    callbacks: list[Callable[[Any], None]]


class Clock(Protocol):
    """The run's environment (:class:`simkv.engine.engine.Environment`): its time, and an
    event at an exact time."""

    @property
    def now(self) -> float: ...

    def timeout_at(self, when: float) -> Event: ...


class FlowEvents:
    """The pending event of ``net`` in ``env``; ``on_done(flows, now)`` gets finished flows."""

    def __init__(
        self, env: Clock, net: TransferNet, on_done: Callable[[list[int], float], None]
    ) -> None:
        self.env = env
        self.net = net
        self._on_done = on_done
        self._tick = 0  # the live event's number (older ones are stale)

    def changed(self) -> None:
        """One pending event at the net's next change (flows that ended as ``start`` moved
        the net's clock are reported at once)."""
        env, net = self.env, self.net
        when = env.now if net.unreported() else net.next_event_s()
        self._tick += 1
        if when != math.inf:
            event = env.timeout_at(max(when, env.now))
            event.callbacks.append(partial(self._fire, self._tick))

    def _fire(self, tick: int, _event: object) -> None:
        if tick != self._tick:
            return  # superseded by a later change
        now = self.env.now
        self._on_done(self.net.advance(now), now)
        self.changed()
