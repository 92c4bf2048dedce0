"""The SimPy engine: a step process (and an arrival process for closed-loop sessions). The only
module importing simpy.

One SimPy event per engine step (a batched forward pass), never per token. Each step: admit the
requests that have arrived, let the scheduler build a plan, price it with the cost model
(forward pass + swaps + copy-on-write copies), advance simulated time, apply the step (tokens
computed, tokens sampled, finished requests free their blocks), record one step row.

Arrival semantics: a request that arrives while a step runs joins at the next step's start; an
idle engine wakes at the next arrival. In closed-loop sessions, turn k + 1 arrives ``think_s``
after turn k has left the system (finished, rejected or aborted). The step process pulls an
open-loop workload's arrivals (:mod:`simkv.engine.arrival_feed`, no SimPy event each) exactly
when ``arrival_feed.ArrivalProcess``, which closed-loop workloads and fleets run, would deliver
them (interleaved with think-time releases).
"""

from __future__ import annotations

import gc
from array import array
from collections.abc import Callable, Generator
from functools import partial
from heapq import heappush
from typing import Protocol

import numpy as np
import simpy

from simkv.engine.arrival_feed import NOTHING, ArrivalFeed, ArrivalProcess
from simkv.engine.handoff import PENDING
from simkv.engine.intake import EngineLimits, Intake
from simkv.engine.lazy import DecodeLane
from simkv.engine.progress import ProgressGuard, stalled
from simkv.engine.request.plan import StepPlan
from simkv.engine.request.seq import Status, record_done
from simkv.engine.scheduler import Scheduler
from simkv.engine.sessions import Sessions
from simkv.engine.step_work import CostModel
from simkv.kv.allocator import InvariantViolation
from simkv.metrics.recorder import Recorder
from simkv.workload.request import Workload

ProgressFn = Callable[[int, int], None]


class FleetHooks(Protocol):
    """What a replica of a fleet (:class:`simkv.engine.fleet.Fleet`) asks its fleet."""

    def num_done(self) -> int:
        """Requests recorded by the whole fleet (the run ends when all are)."""

    def follow_up(self, j: int, think_s: float) -> None:
        """Route request ``j``, a closed-loop follow-up turn, ``think_s`` from now."""

    def horizon_s(self) -> float:
        """The next time anything can be delivered to a replica (the end of a decode run
        without the scheduler: other replicas' steps cannot change this one)."""


class StepHooks(Protocol):
    """Told of each step a prefill replica runs (:mod:`simkv.engine.layerwise`)."""

    def started(self, plan: StepPlan, start_s: float, end_s: float) -> None: ...

    def ended(self, plan: StepPlan, now: float) -> None: ...


class Environment(simpy.Environment):
    """SimPy's environment with a timeout that ends exactly at a given time."""

    def timeout_at(self, when: float) -> simpy.Event:
        """Like ``timeout(when - now)``, but processed at exactly ``when``: the float
        ``now + (when - now)`` that a timeout ends at can miss ``when`` by one ulp, and an idle
        engine must wake exactly when the next arrival batch fires. Queues the event as
        ``Environment.schedule`` does (SimPy 4's ``(time, priority, id, event)`` heap)."""
        if when < self.now:
            raise ValueError(f"timeout_at({when!r}) is before now ({self.now!r})")
        event = simpy.Event(self)
        event._ok = True  # triggered, as a Timeout is from its creation
        event._value = None
        heappush(self._queue, (when, simpy.core.NORMAL, next(self._eid), event))
        return event


class Engine:
    """One run's simulation. All state lives in this object and its SimPy environment."""

    def __init__(
        self,
        workload: Workload,
        scheduler: Scheduler,
        cost: CostModel,
        recorder: Recorder,
        limits: EngineLimits,
        *,
        check_invariants: bool = False,
        progress: ProgressFn | None = None,
        fast_forward: bool = True,
        pull_arrivals: bool = True,
        env: Environment | None = None,
        sessions: Sessions | None = None,
    ) -> None:
        # a fleet's replicas share one environment and one Sessions (simkv.engine.fleet)
        self.env = Environment() if env is None else env
        self.fast_forward = fast_forward  # the decode lane (checked runs bring it up to date)
        self.fast_forward_steps = 0  # steps in which the decode lane's members decoded
        self.decode_run_steps = 0  # ... of which the engine stepped without the scheduler
        self.scheduler = scheduler
        scheduler.lazy_decode(self.fast_forward)
        self.cost = cost
        self.recorder = recorder
        self.limits = limits
        self.check_invariants = check_invariants
        self.progress = progress
        # every request's arrival time (read only)
        self.arrival_s = array("d", workload.arrival_s.astype(np.float64).tobytes())
        self.intake = Intake(workload, scheduler, limits)
        self._sessions = Sessions(workload) if sessions is None else sessions
        # open loop: the step process pulls the arrivals (no SimPy event per arrival)
        self._feed: ArrivalFeed | None = None
        if pull_arrivals and not self._sessions.closed_loop:
            self._feed = ArrivalFeed(self.arrival_s, self._sessions.independent)
        self._resume = 0  # resumes of the step process so far (arrival_feed's ranks)
        self._inbox: list[tuple[int, float]] = []  # (request, arrival time) not yet admitted
        self._seen_done = 0  # recorded requests whose follow-ups were released
        self._guard = ProgressGuard()
        self._wake: simpy.Event | None = None
        self.fleet: FleetHooks | None = None  # set by the fleet this engine is a replica of
        self._prefilled: set[int] = set()  # delivered requests prefilled on another replica
        self.step_hooks: StepHooks | None = None  # a prefill replica's, layer-wise hand-overs

    def run(self) -> None:
        """Simulate until every request has finished, been rejected or been aborted.

        A run builds no reference cycles (reference counting frees everything it drops;
        ``tests/engine/test_no_cycles.py`` checks every shipped config), so Python's cyclic
        garbage collector, which would only traverse the long-lived requests again and again
        (seconds at a million requests), is paused while the run lasts and resumed afterwards.
        """
        if self._feed is None:
            arrivals = ArrivalProcess(self.arrival_s, self._sessions.independent)
            self.env.process(arrivals.run(self.env, self.deliver))
        done = self.env.process(self._steps())
        collecting = gc.isenabled()
        gc.disable()
        try:
            self.env.run(until=done)
        finally:
            if collecting:
                gc.enable()

    def step_process(self) -> simpy.Process:
        """Start this engine's step process (a fleet starts each replica's; :meth:`run`
        starts the arrival and step processes of one engine)."""
        return self.env.process(self._steps())

    def deliver(self, i: int, arrival_s: float) -> None:
        """Request ``i`` (arrived at ``arrival_s``, now) joins at the next step's start; an
        idle engine wakes. (A fleet's router delivers each request to one replica.)"""
        self._inbox.append((i, arrival_s))
        self.wake_up()

    def deliver_prefilled(self, i: int, arrival_s: float) -> None:
        """:meth:`deliver` request ``i`` whose prompt was prefilled on another replica: its
        KV is to be received (:mod:`simkv.engine.handoff`)."""
        self._prefilled.add(i)
        self.deliver(i, arrival_s)

    def load(self) -> tuple[array, float]:
        """What a fleet's router reads of this engine (:mod:`simkv.engine.fleet_view`): the
        requests recorded so far, in the order they left (a live view: read, never change),
        and the KV pool's share in use (blocks used / (used + free); slots, contiguous)."""
        state = self.scheduler.step_state()
        total = state.blocks_used + state.blocks_free
        return self.recorder.done_ids, state.blocks_used / total if total else 0.0

    def cached_prefix_tokens(self, i: int, now: float) -> int:
        """Tokens of request ``i``'s prompt in this engine's prefix cache, whole blocks as its
        scheduler would hit them at admission (0 without prefix caching)."""
        return self.scheduler.cached_prefix_tokens(partial(self.intake.seq, i, now, now))

    def prefix_sources(self, i: int, now: float) -> dict[str, int]:
        """Tokens of request ``i``'s prompt in HBM (``hbm``) and after them in each KV tier
        (by kind), as its scheduler would find them at admission."""
        return self.scheduler.prefix_sources(partial(self.intake.seq, i, now, now))

    def busy(self) -> bool:
        """Whether this engine has requests (queued, running, or delivered and not admitted)."""
        return bool(self._inbox) or self.scheduler.has_work() or self.scheduler.awaiting_kv()

    def wake_up(self) -> None:
        """An idle engine resumes its step process now (nothing happens otherwise)."""
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _take_arrivals(self, now: float) -> None:
        """The arrivals the feed delivers to this resume of the step process."""
        feed = self._feed
        if feed is None:
            raise InvariantViolation("arrivals taken from an engine without an arrival feed")
        times = self.arrival_s
        for i in feed.take(now, self._resume):
            self._arrive(i, times[i], now)

    def _admit(self, now: float) -> None:
        for i, arrival_s in self._inbox:
            self._arrive(i, arrival_s, now)
        self._inbox.clear()

    def _release_follow_ups(self) -> None:
        done = self.recorder.done_ids
        for i in done[self._seen_done :]:
            for follow in self._sessions.follow_up(i):
                if self.fleet is None:
                    self._follow_up(*follow)
                else:
                    self.fleet.follow_up(*follow)
        self._seen_done = len(done)

    def _follow_up(self, j: int, think_s: float) -> None:
        """Request ``j`` arrives ``think_s`` from now, at this engine."""
        self.env.timeout(think_s).callbacks.append(lambda _ev, j=j: self._release(j))

    def _release(self, j: int) -> None:
        self._inbox.append((j, self.env.now))
        self.wake_up()

    def _arrive(self, i: int, arrival_s: float, now: float) -> None:
        seq = self.intake.seq(i, arrival_s, now)
        if self._prefilled and i in self._prefilled:
            self._prefilled.discard(i)
            seq.remote = PENDING
        if seq.status is Status.REJECTED:
            record_done(self.recorder, seq)
        else:
            self.scheduler.add(seq, now)

    def _steps(self) -> Generator[simpy.Event, None, None]:
        env, sched, cost, rec = self.env, self.scheduler, self.cost, self.recorder
        total = len(self.arrival_s)
        fast, checking = self.fast_forward, self.check_invariants
        closed_loop, feed = self._sessions.closed_loop, self._feed
        timeout = simpy.Timeout  # (env.timeout builds a bound method per call)
        while True:
            start = env.now
            if feed is not None:
                if feed.fire_s <= start:
                    self._take_arrivals(start)
            elif self._inbox:
                self._admit(start)
            if fast:
                lane = sched.decode_run()
                if lane is not None:
                    yield from self._decode_run(lane)
                    if env.now != start:
                        continue
            plan = sched.schedule(start)
            if closed_loop:
                self._release_follow_ups()  # requests rejected at arrival or admission
            if not plan.seqs and not plan.cohort:  # plan.empty
                if plan.preempted:
                    self._guard.watch(plan, rec, start, sched)
                    continue  # the preemptions freed memory: schedule again at the same time
                if sched.has_work() and not sched.awaiting_kv():  # (else KV in flight)
                    raise stalled(start, sched)
                if (rec.num_done if self.fleet is None else self.fleet.num_done()) == total:
                    return
                yield from self._idle()
                continue
            plan.queued_requests = len(sched.waiting)  # (host cost per queued request)
            if checking:
                plan.work()  # every count >= 0
            duration = cost.step_time_s(plan)
            if plan.swap_in_blocks or plan.swap_out_blocks:
                duration += cost.swap_time_s(plan.swap_in_blocks + plan.swap_out_blocks)
            if plan.copy_blocks:
                duration += cost.copy_time_s(plan.copy_blocks)
            hooks = self.step_hooks
            if hooks is not None:
                hooks.started(plan, start, start + duration)
            yield timeout(env, duration)
            if hooks is not None:
                hooks.ended(plan, env.now)
            self._resume += 1
            if plan.cohort:
                self.fast_forward_steps += 1
            sched.complete(plan, env.now)
            if closed_loop:
                self._release_follow_ups()
            self._record(start, duration, plan)
            if plan.preempted or self._guard.thrash:
                self._guard.watch(plan, rec, start, sched)
            if checking:
                sched.check()
                sched.breakdown()  # every waste category >= 0
            if self.progress is not None and rec.num_steps % 512 == 0:
                self.progress(rec.num_done, total)

    def _idle(self) -> Generator[simpy.Event, None, None]:
        """Nothing to run: wait for the next arrival batch (exactly when it fires) or, with
        an arrival process, until it or a think time wakes the engine."""
        feed, env = self._feed, self.env
        if feed is not None and feed.fire_s != NOTHING:
            yield env.timeout_at(feed.fire_s)
        else:
            self._wake = env.event()
            yield self._wake
            self._wake = None
        self._resume += 1

    def _decode_run(self, lane: DecodeLane) -> Generator[simpy.Event, None, None]:
        """Steps in which only the lane's members decode (:meth:`Scheduler.decode_run`),
        without the scheduler: up to the step before a member's last token, the last step
        ending before the next event (an arrival or a think time, so nothing can join), or a
        block shortage. Each step is still one SimPy timeout, so times are the same floats."""
        env, sched, cost, rec = self.env, self.scheduler, self.cost, self.recorder
        horizon = env.peek() if self.fleet is None else self.fleet.horizon_s()
        if self._feed is not None:
            horizon = min(horizon, self._feed.fire_s)
        ticks = lane.steps_before_finish()
        checking = self.check_invariants
        plan = StepPlan()  # each step's row; the same object, updated
        # (nothing waits in a decode run, Scheduler.decode_run: queued_requests stays 0)
        while ticks > 0:
            lane.plan_alone(plan)
            duration = cost.step_time_s(plan)
            start = env.now
            if start + duration >= horizon or not lane.take_blocks_alone():
                return
            yield env.timeout(duration)
            self._resume += 1
            sched.complete_decode_run_step(plan, env.now)
            self._record(start, duration, plan)
            self.fast_forward_steps += 1
            self.decode_run_steps += 1
            ticks -= 1
            if checking:
                sched.check()
                sched.breakdown()
            if self.progress is not None and rec.num_steps % 512 == 0:
                self.progress(rec.num_done, len(self.arrival_s))

    def _record(self, start: float, duration: float, plan: StepPlan) -> None:
        self.recorder.step(
            start, duration, plan.prefill_tokens, plan.decode_tokens, plan.num_seqs,
            plan.preempted, plan.swap_out_blocks, plan.swap_in_blocks, plan.copy_blocks,
            plan.cache_hit_tokens, self.scheduler.step_state(),
        )  # fmt: skip
