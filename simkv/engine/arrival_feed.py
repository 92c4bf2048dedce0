"""The arrival process of a run — one engine's or a fleet's — and its pulled twin.

:class:`ArrivalProcess` is the one SimPy arrival process: each distinct arrival time ``t`` one
timeout of ``t - now``, created when the previous batch fired; when it fires, every request
arriving at ``t`` is handed to ``deliver`` (an engine's :meth:`~simkv.engine.engine.Engine.deliver`,
or a fleet's router, which then delivers to the replica it picks). A closed-loop engine, an
engine without pulled arrivals and every fleet run it.

An open-loop workload (no closed-loop sessions) needs no SimPy process for its arrivals: the
step process takes them at each step's start. :class:`ArrivalFeed` decides which ones, exactly
as a separate arrival process would have delivered them — the process that waits for each
distinct arrival time ``t`` with a timeout of ``t - now`` created when the previous batch fired
(so a batch fires at ``f = f_prev + (t - f_prev)``, the float SimPy computes), and pushes every
request arriving at ``t`` (and, in the same resume, any later batch whose time is not after
``f``). A step that starts at ``now`` sees a batch that fired before ``now``; one that fired
exactly at ``now`` only if its timeout was created before the step's own (SimPy processes
same-time events in creation order).

Creation order is tracked by *ranks*: the step process counts its resumes (the first is resume
0), and every resume but the first was caused by the one event the step process created during
the resume before. A timeout the arrival process creates between the step process's resumes
``r - 1`` and ``r`` has rank ``r``: at resume ``r``, a batch firing exactly ``now`` was first iff
its rank is below ``r`` (created before the event that woke this resume, in resume ``r - 1``).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Generator
from typing import Any, Protocol

NOTHING = math.inf  # fire time when every batch has been delivered


class Clock(Protocol):
    """The SimPy environment as the arrival process uses it."""

    @property
    def now(self) -> float: ...

    def timeout(self, delay: float) -> Any: ...


class ArrivalProcess:
    """The independent arrivals of one run (``order``: request indices in arrival order, at
    ``times``) as a SimPy process (:meth:`run`). ``next_s``: when the process resumes next
    (:data:`NOTHING` once every request is delivered): nothing arrives before it."""

    __slots__ = ("_order", "_times", "next_s")

    def __init__(self, times: array, order: range | list[int]) -> None:
        self._times = times
        self._order = order
        self.next_s = 0.0  # (before the process starts: its first resume is at time 0)

    def run(
        self,
        env: Clock,
        deliver: Callable[[int, float], None],
        after_batch: Callable[[int], None] | None = None,
    ) -> Generator[Any, None, None]:
        """The process (``env.process(arrivals.run(env, deliver))``): ``deliver(i, t)`` gets
        request ``i`` at its arrival time ``t``, in order; ``after_batch(k)``, if given, runs
        after each batch with the requests delivered so far. (The callbacks live as long as
        the process: the arrival process holds no reference to its caller.)"""
        times, order = self._times, self._order
        n, k = len(order), 0
        while k < n:
            t = times[order[k]]
            if t > env.now:
                self.next_s = env.now + (t - env.now)  # the float the timeout fires at
                yield env.timeout(t - env.now)
            while k < n and times[order[k]] == t:
                deliver(order[k], t)
                k += 1
            if after_batch is not None:
                after_batch(k)
        self.next_s = NOTHING


class ArrivalFeed:
    """The independent arrivals of one run (``order``: request indices in arrival order),
    delivered as :class:`ArrivalProcess` would, without its process."""

    __slots__ = ("_k", "_n", "_order", "_rank", "_times", "fire_s")

    def __init__(self, times: array, order: range | list[int]) -> None:
        self._times = times
        self._order = order
        self._n = len(order)
        self._k = 0  # the next request (index into order) not delivered
        # the arrival process's first resume comes before the step process's first (it is
        # started first): it pushes the batches at time 0 at once (rank -1: before anything)
        # or waits for the first one with a timeout of rank 0
        self.fire_s = NOTHING
        self._rank = -1
        if self._n:
            first = times[order[0]]
            if first > 0.0:
                self.fire_s, self._rank = 0.0 + (first - 0.0), 0
            else:
                self.fire_s = 0.0

    def take(self, now: float, resume: int) -> list[int]:
        """The requests delivered to the step process's ``resume``-th resume, at ``now``.
        (An idle step process waits for the next batch with a timeout created after that
        batch's: it is delivered by the same rule.)"""
        out: list[int] = []
        times, order, n = self._times, self._order, self._n
        while self._k < n:
            fire = self.fire_s
            if not (fire < now or (fire == now and self._rank < resume)):
                break
            # the arrival process resumes at `fire`: it pushes this batch and every batch not
            # later than `fire`, then creates its next timeout (before this resume of ours)
            k = self._k
            t = times[order[k]]
            while True:
                while k < n and times[order[k]] == t:
                    out.append(order[k])
                    k += 1
                if k == n:
                    break
                t = times[order[k]]
                if t > fire:
                    break  # a later batch: the next timeout
            self._k = k
            self.fire_s = fire + (t - fire) if k < n else NOTHING
            self._rank = resume
        return out
