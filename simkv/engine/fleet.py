"""A fleet: replicas (one :class:`~simkv.engine.engine.Engine` each) in one SimPy environment,
behind a router that decides at arrival.

Processes, all in the replicas' shared environment (started in this order, which fixes the
order of same-time events): the arrival process
(:class:`~simkv.engine.arrival_feed.ArrivalProcess`, the one an engine runs alone, here handing
each arrival to the router), each replica's step process, and, with stale signals, the
refresher. At an arrival (or a closed-loop follow-up's release, ``think_s`` after its previous
turn left whichever replica served it) the router picks a replica
(:mod:`simkv.engine.routers`), and the request joins that replica's next step
(:meth:`Engine.deliver`). A fleet of one replica gives exactly the frames of one ``Engine``
(``tests/engine/test_fleet_equivalence.py``).

Speed: no event per token or per replica beyond each replica's own steps. A replica's run of
decode-only steps without its scheduler ends at the next arrival or release, not at other
replicas' steps (:meth:`Fleet.horizon_s`): nothing another replica does reaches it but
through the router.

The refresher (``staleness_s > 0``) refreshes the router's view at times ``0, s, 2s, …``;
while the whole fleet is idle the loads cannot change, so it sleeps until the next routing
and resumes on the grid. The run ends when every request is recorded; replicas still idle
then are woken to end their processes, and the replicas' hooks are cleared (no reference
cycle outlives the run).
"""

from __future__ import annotations

import gc
import math
from array import array
from collections.abc import Callable, Generator
from heapq import heappop, heappush
from typing import Any

from simkv.engine.arrival_feed import ArrivalProcess
from simkv.engine.disagg import Disaggregation
from simkv.engine.engine import Engine
from simkv.engine.fleet_view import FleetView
from simkv.engine.routers import Router
from simkv.engine.sessions import Sessions
from simkv.kv.allocator import InvariantViolation

ProgressFn = Callable[[int, int], None]


class Fleet:
    """One fleet run: the replicas, the router, the view it reads, which replica served
    which request (``replica_of``, complete after :meth:`run`) and how many each got."""

    def __init__(
        self,
        replicas: list[Engine],
        router: Router,
        view: FleetView,
        sessions: Sessions,
        *,
        progress: ProgressFn | None = None,
        disagg: Disaggregation | None = None,
    ) -> None:
        """``view`` is over the replicas that serve requests (all but prefill replicas, in
        fleet order); ``disagg``: the prefill/decode side of a fleet with prefill replicas."""
        env = replicas[0].env
        if any(engine.env is not env for engine in replicas):
            raise InvariantViolation("a fleet's replicas share one environment")
        self.env = env
        self.replicas = replicas
        self.router = router
        self.view = view
        self.progress = progress
        self.disagg = disagg
        roles = disagg.roles if disagg is not None else ["mixed"] * len(replicas)
        self.serving = [r for r, role in enumerate(roles) if role != "prefill"]
        times = replicas[0].arrival_s  # (every replica runs the same workload)
        self.total = len(times)
        self.replica_of = array("q", bytes(8 * self.total))  # every request is routed once
        self._arrivals = ArrivalProcess(times, sessions.independent)
        self._releases: list[float] = []  # times of follow-up releases scheduled, a heap
        self._activity: Any = None  # the idle refresher's wake-up event

    def run(self) -> None:
        """Simulate until every request has been recorded by some replica."""
        env = self.env
        env.process(self._arrivals.run(env, self._route, self._arrived))
        for engine in self.replicas:
            engine.fleet = self
            engine.step_process()
        if self.view.staleness_s > 0:
            env.process(self._refresher())
        collecting = gc.isenabled()
        gc.disable()
        try:
            env.run()
            for engine in self.replicas:  # idle replicas end their step processes
                engine.wake_up()
            env.run()
        finally:
            for engine in self.replicas:
                engine.fleet = None
            if collecting:
                gc.enable()
        if self.num_done() != self.total:
            raise InvariantViolation(f"{self.num_done()} of {self.total} requests recorded")

    def num_done(self) -> int:
        """Requests recorded by the replicas that serve them (prefill replicas record each
        request's prefill, not the request)."""
        replicas = self.replicas
        return sum(replicas[r].recorder.num_done for r in self.serving)

    def horizon_s(self) -> float:
        """The next arrival or follow-up release: no replica's state changes otherwise (with
        prefill replicas, the next event of any kind: a prefill's end or a transfer's reaches
        a decode replica)."""
        if self.disagg is not None:
            return self.env.peek()
        releases, arrival = self._releases, self._arrivals.next_s
        return min(arrival, releases[0]) if releases else arrival

    def follow_up(self, j: int, think_s: float) -> None:
        """Route request ``j`` ``think_s`` from now (when the previous turn has left)."""
        env = self.env
        heappush(self._releases, env.now + think_s)  # the float SimPy schedules it at
        env.timeout(think_s).callbacks.append(lambda _ev, j=j: self._release(j))

    def _release(self, j: int) -> None:
        heappop(self._releases)  # this one: releases fire in time order
        self._route(j, self.env.now)

    def _route(self, i: int, arrival_s: float) -> None:
        k = self.router.choose(i, arrival_s, self.view)
        if not 0 <= k < self.view.size:
            raise InvariantViolation(f"router chose replica {k} of {self.view.size}")
        self.view.note_routed(k, i)
        r = self.serving[k]
        self.replica_of[i] = r
        if self.disagg is None or not self.disagg.remote(i, r, arrival_s):
            self.replicas[r].deliver(i, arrival_s)
        if self._activity is not None and not self._activity.triggered:
            self._activity.succeed()

    def _arrived(self, k: int) -> None:
        """The arrival process delivered a batch (``k`` requests so far)."""
        if self.progress is not None and k % 256 == 0:
            self.progress(self.num_done(), self.total)

    def _refresher(self) -> Generator[Any, None, None]:
        env, every = self.env, self.view.staleness_s
        tick = 0  # refreshes at tick × every, exactly those floats
        while True:
            self.view.refresh()
            if self.disagg is not None:
                self.disagg.view.refresh()
            if self.num_done() == self.total:
                return
            if not any(engine.busy() for engine in self.replicas):
                self._activity = env.event()  # loads stay as they are until a routing
                yield self._activity
                self._activity = None  # (the snapshot taken idle still holds) to the grid
                tick = max(tick, math.floor(env.now / every))
            tick += 1
            while tick * every <= env.now:  # (now / every may round below its integer)
                tick += 1
            yield env.timeout_at(tick * every)
