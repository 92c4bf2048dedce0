"""The SimPy engine: an arrival process and a step process. The only module importing simpy.

One SimPy event per engine step (a batched forward pass), never per token. Each step: admit the
requests that have arrived, let the scheduler build a plan, price it with the cost model
(forward pass + swaps + copy-on-write copies), advance simulated time, apply the step (tokens
computed, tokens sampled, finished requests free their blocks), record one step row.

Arrival semantics: a request that arrives while a step runs joins at the next step's start; an
idle engine wakes at the next arrival.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

import simpy

from simkv.engine.cost_model import CostModel
from simkv.engine.plan import StepPlan
from simkv.engine.scheduler import Scheduler
from simkv.engine.sequence import Seq, Status
from simkv.metrics.recorder import Recorder
from simkv.workload.content import KeyStream, unique_segments
from simkv.workload.request import Workload

ProgressFn = Callable[[int, int], None]


class SimulationStalled(RuntimeError):
    """Requests remain but the scheduler can schedule nothing and nothing runs."""


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """Model limits applied at arrival (vLLM's ``max_model_len`` handling), and whether
    requests carry content keys (prefix caching on)."""

    max_model_len: int
    block_size: int
    content_keys: bool = False


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
    ) -> None:
        self.env = simpy.Environment()
        self.scheduler = scheduler
        self.cost = cost
        self.recorder = recorder
        self.limits = limits
        self.check_invariants = check_invariants
        self.progress = progress
        self._arrival_s = workload.arrival_s.tolist()
        self._prompt = workload.prompt_tokens.tolist()
        self._output = workload.output_tokens.tolist()
        self._priority = workload.priority.tolist()
        self._content = workload.content
        self._released = 0  # requests the arrival process has released so far
        self._admitted = 0
        self._wake: simpy.Event | None = None

    def run(self) -> None:
        """Simulate until every request has finished, been rejected or been aborted."""
        self.env.process(self._arrivals())
        done = self.env.process(self._steps())
        self.env.run(until=done)

    def _arrivals(self) -> Generator[simpy.Event, None, None]:
        env, times = self.env, self._arrival_s
        n, i = len(times), 0
        while i < n:
            t = times[i]
            if t > env.now:
                yield env.timeout(t - env.now)
            while i < n and times[i] == t:
                i += 1
            self._released = i
            if self._wake is not None and not self._wake.triggered:
                self._wake.succeed()

    def _admit(self, now: float) -> None:
        for i in range(self._admitted, self._released):
            self._arrive(i, now)
        self._admitted = self._released

    def _arrive(self, i: int, now: float) -> None:
        prompt, output = self._prompt[i], self._output[i]
        max_len = self.limits.max_model_len
        truncated = prompt + output > max_len
        seq = Seq(
            i, self._arrival_s[i], prompt, min(output, max_len - prompt) if truncated else output,
            self._priority[i], self.limits.block_size, truncated,
        )  # fmt: skip
        if prompt >= max_len:  # vLLM rejects a prompt that leaves no room for one output token
            seq.output_tokens = output
            seq.status = Status.REJECTED
            seq.reason = "prompt_too_long"
            seq.finish_s = now
            self.recorder.request_done(seq)
            return
        if self.limits.content_keys:
            seq.keys = self._keys(i, prompt)
        self.scheduler.add(seq, now)

    def _keys(self, i: int, prompt: int) -> KeyStream:
        content = self._content
        if content is None:
            segments, output_id = unique_segments(i, prompt)
        else:
            segments, output_id = content.segments(i), int(content.output_ids[i])
        return KeyStream(segments, output_id, self.limits.block_size)

    def _steps(self) -> Generator[simpy.Event, None, None]:
        env, sched, cost, rec = self.env, self.scheduler, self.cost, self.recorder
        total = len(self._arrival_s)
        while True:
            self._admit(env.now)
            start = env.now
            plan = sched.schedule(start)
            if plan.empty:
                if plan.preempted:
                    continue  # the preemptions freed memory: schedule again at the same time
                if sched.has_work():
                    raise SimulationStalled(f"at t={start:.6f}s: {sched.queue_lengths()}")
                if self._admitted == total:
                    return
                self._wake = env.event()
                yield self._wake
                self._wake = None
                continue
            duration = cost.step_time_s(plan.work())
            if plan.swap_in_blocks or plan.swap_out_blocks:
                duration += cost.swap_time_s(plan.swap_in_blocks + plan.swap_out_blocks)
            if plan.copy_blocks:
                duration += cost.copy_time_s(plan.copy_blocks)
            yield env.timeout(duration)
            sched.complete(plan, env.now)
            self._record(start, duration, plan)
            if self.check_invariants:
                sched.check()
            if self.progress is not None and rec.num_steps % 512 == 0:
                self.progress(rec.num_done, total)

    def _record(self, start: float, duration: float, plan: StepPlan) -> None:
        sched = self.scheduler
        waiting, running, swapped = sched.queue_lengths()
        used, free, cpu_used = sched.memory_state()
        b = sched.breakdown()
        cached, shared, evictions = sched.cache_state()
        self.recorder.step((
            start, duration, plan.prefill_tokens, plan.decode_tokens, len(plan.seqs),
            waiting, running, swapped, used, free, b.token_slots, b.reserved_slots,
            b.internal_frag_slots, b.external_frag_slots, b.free_slots, cpu_used,
            plan.preempted, plan.swap_out_blocks, plan.swap_in_blocks, plan.copy_blocks,
            plan.cache_hit_tokens, cached, shared, evictions,
        ))  # fmt: skip
