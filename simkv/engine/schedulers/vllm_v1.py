"""vLLM V1 scheduler, following vLLM 0.11's ``Scheduler.schedule`` (``v1/core/sched/scheduler.py``)
and, with ``vllm_version: "0.32"``, vLLM 0.32.0's where the releases differ.

Per step, one token budget (``max_num_batched_tokens``; unset: 8192, or ``max_model_len`` with
chunked prefill off, as vLLM 0.11's ``EngineArgs``) is shared by prefill chunks and decodes:

1. Running requests first, in admission order. Each gets ``min(remaining known tokens,
   long_prefill_token_threshold if set, budget)`` tokens (chunked prefill on or off; under
   0.32 the threshold is off while at most one request runs or waits). When its
   blocks cannot be allocated, a victim is preempted by recompute (``newest`` = last admitted
   under FCFS, ``lowest_priority`` = largest (priority, arrival) under the priority policy,
   vLLM's own choice when ``preemption.victim`` is unset) and put back at the head of the
   waiting queue; if the victim is the request itself, the running pass stops.
2. Waiting requests only if nothing was preempted in this step, while fewer than
   ``max_num_seqs`` run and budget remains. The threshold caps a request's chunk first; with
   chunked prefill on the chunk is then cut to the budget left; with it off a request whose
   chunk exceeds the budget left is set aside and the next one tried (``vllm_version: 0.11``,
   the default; the set-aside ones return to the head afterwards, the last one first) or
   admission stops (``vllm_version: "0.32"``: vLLM PR #28911). With ``reserve_full_prompt``
   (vLLM's ``scheduler_reserve_full_isl``, on by default under 0.32) a request is admitted
   only when blocks for all its tokens are free. A failed allocation stops admission for the
   step.

Under 0.32 freed blocks without cached content are reused first (``kv_cache.reuse: split``,
``v1/core/block_pool.py`` ``BlockPool.free_blocks``). ``tools/vllm_reference/`` runs random
scenarios through a real vLLM 0.32.0 and compares every step (``docs/conformance.md``).

With ``async_scheduling`` (vLLM's ``AsyncScheduler``) outputs are processed a step late
(:mod:`~simkv.engine.schedulers.async_outputs`): a finished request holds its slot and blocks
through the next step's scheduling, and blocks are cached a step later. A schedule that plans
nothing but released parked requests schedules again at once (vLLM's next ``schedule()``
call, after the outputs were processed).

There is no watermark and no swapping in V1: KV that cannot be kept is recomputed. The KV
memory (:class:`~simkv.engine.memory.paged.PagedKV`) reserves block 0 as vLLM's null block and
caches full blocks as they are allocated (vLLM 0.11's ``KVCacheManager.allocate_slots``).

Victims. vLLM has only ``newest`` (FCFS) and ``lowest_priority`` (priority policy); a victim
of simkv's what-if policies is held until the request it gave way to has run
(:mod:`~simkv.engine.schedulers.holds`: no livelock).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simkv.config.policy import (
    VICTIMS_OF_VLLM,
    PreemptionConfig,
    VllmV1Config,
    v1_budget,
    v1_max_seqs,
)
from simkv.config.sim import SimConfig
from simkv.engine.capacity import KVSizing
from simkv.engine.lazy import DecodeLane
from simkv.engine.memory.paged import PagedKV
from simkv.engine.queues import WaitingQueue, make_queue, pick_victim
from simkv.engine.registry import paged_memory, register
from simkv.engine.request.plan import StepPlan
from simkv.engine.request.seq import Seq, Status
from simkv.engine.scheduler import SchedulerBase
from simkv.engine.schedulers.async_outputs import AsyncOutputs
from simkv.engine.schedulers.holds import Holds
from simkv.metrics.recorder import Recorder


@register(VllmV1Config)
class VllmV1Scheduler(SchedulerBase):
    """Continuous batching with chunked prefill and recompute preemption (vLLM 0.11)."""

    uses_lane = True

    def __init__(
        self,
        cfg: VllmV1Config,
        preemption: PreemptionConfig,
        kv: PagedKV,
        recorder: Recorder,
        *,
        max_model_len: int,
    ) -> None:
        super().__init__(kv, recorder, self.waiting_queue(cfg))
        self.cfg = cfg
        self.kv: PagedKV = kv
        self.budget = v1_budget(cfg, max_model_len)  # tokens per step
        self.max_seqs = v1_max_seqs(cfg, max_model_len)  # running requests
        self.victim = preemption.victim_for(cfg.policy)
        # chunked prefill off, a waiting request over the budget left: set aside (vLLM 0.11)
        self._set_aside = not cfg.enable_chunked_prefill and cfg.vllm_version == "0.11"
        self.reserve_full = cfg.reserves_full_prompt()
        # the long-prefill threshold of this step (0 = off; set by schedule under 0.32)
        self._threshold = cfg.long_prefill_token_threshold
        self._lone_unthreshold = self._threshold > 0 and cfg.whole_step_threshold()
        if kv.cache is not None:
            self.fill_block_size = kv.block_size
        self._plan = StepPlan()  # the plan being built (for the lane's preemption callback)
        self._now = 0.0  # when the step being planned starts (its preemptions' time)
        # (head, budget, blocks): the waiting head that could not be admitted with that budget
        # and cannot hit the prefix cache (kv.prefix.cannot_hit) stays out while fewer blocks
        # are free (forgotten once it is admitted: after a preemption it may hit its own blocks)
        self._blocked: tuple[Seq, int, int] | None = None
        # what-if victims (see the module docstring): preempted request -> the one it gave way to
        self._held: Holds | None = None if self.victim in VICTIMS_OF_VLLM else Holds()
        # async scheduling: outputs processed a step late (the module docstring)
        self._async = AsyncOutputs(kv, recorder) if cfg.async_scheduling else None
        self._in_flight_s: float | None = None  # when this schedule's outputs in flight ended
        if self._async is not None:
            self.uses_lane = False  # the lane's steps assume a finished request leaves at once
            self.fill_block_size = 0  # blocks are cached as outputs are processed

    @classmethod
    def waiting_queue(cls, cfg: VllmV1Config) -> WaitingQueue:
        """The waiting queue of ``cfg.policy`` (FCFS or priority, as vLLM 0.11)."""
        return make_queue(cfg.policy)

    @classmethod
    def build(
        cls, cfg: SimConfig, sizing: KVSizing, recorder: Recorder, rng: np.random.Generator
    ) -> VllmV1Scheduler:
        return cls(
            cfg.scheduler, cfg.preemption, paged_memory(cfg, sizing), recorder,  # type: ignore[arg-type]
            max_model_len=cfg.model.max_model_len,
        )  # fmt: skip

    def _chunk(self, num_new: int, budget: int) -> int:
        """Tokens to schedule out of ``num_new`` remaining: threshold and budget applied."""
        threshold = self._threshold
        if 0 < threshold < num_new:
            num_new = threshold
        return min(num_new, budget)

    def _tokens_for(self, seq: Seq, budget: int) -> int:
        """Tokens a running request would be scheduled with ``budget`` left."""
        return self._chunk(seq.num_tokens - seq.num_computed, budget)

    def decode_run(self) -> DecodeLane | None:
        """Also the members fit the token budget."""
        lane = super().decode_run()
        if lane is None or lane.size > self.budget:
            return None
        return lane

    def schedule(self, now: float) -> StepPlan:
        outputs = self._async
        if outputs is None:
            return self._schedule(now)
        self._in_flight_s = self._prev_end_s
        plan = self._schedule(now)
        released = bool(outputs.parked)
        outputs.processed(self.running)
        if released and not plan.seqs and not plan.preempted:
            self._in_flight_s = None  # vLLM's next schedule() call: every output processed
            plan = self._schedule(now)
            outputs.processed(self.running)
        return plan

    def _on_output_complete(self, seq: Seq, now: float) -> None:
        """Finish ``seq``, or park it under async scheduling (it stays running)."""
        if self._async is None:
            self._finish(seq, now)
        else:
            self._async.park(seq, now)

    def _drop_ended(self, ended: list[Seq]) -> None:
        if self._async is None:  # (parked requests stay in the running list)
            super()._drop_ended(ended)

    def _schedule(self, now: float) -> StepPlan:
        plan = self._plan = StepPlan()
        self._now = now
        budget = self.budget
        if self._lone_unthreshold:
            # vLLM 0.32 Scheduler.schedule: a lone request has nobody to starve
            lone = len(self.running) + len(self.waiting) <= 1
            self._threshold = 0 if lone else self.cfg.long_prefill_token_threshold
        lane = self.lane
        if lane is not None and lane.size:
            # victims may be requests scheduled earlier in the step: under ``newest`` the lane
            # replays a shortage exactly, under the others no member may become one
            if self.victim == "newest":
                fits = lane.size <= budget
                preempt_last: Callable[[], Seq] | None = self._preempt_last
            else:
                fits = lane.others_fit(self.running, budget, self._tokens_for)
                preempt_last = None
            budget -= lane.plan_members(plan, self.running, fits=fits, preempt_last=preempt_last)
        if plan.cohort < len(self.running):
            budget = self._schedule_running(plan, budget, plan.cohort)
        if self.waiting and not plan.preempted:
            self._schedule_waiting(plan, budget, now)
        return plan

    def _schedule_running(self, plan: StepPlan, budget: int, start: int) -> int:
        """The running requests from ``start`` on (those before are the lane's members)."""
        running = self.running
        bs, refs = self.kv.block_size, self.kv.refcounts
        seqs, num_new_list = plan.seqs, plan.num_new
        decodes = context = 0  # hot-path decodes, summed into the plan once at the end
        i, n = start, len(running)
        while i < n and budget > 0:
            seq = running[i]
            table = seq.table
            cached = table.length  # == seq.num_computed between steps
            # hot path: a decode into the request's own partial trailing block (plan.add_decode,
            # inlined: one pass per running request per step)
            if (
                seq.num_output and seq.num_tokens - cached == 1
                and cached % bs and refs[table.block_ids[-1]] == 1
            ):  # fmt: skip
                table.length = cached + 1
                seqs.append(seq)
                num_new_list.append(1)
                decodes += 1
                context += cached + 1
                budget -= 1
                i += 1
                continue
            num_new = self._chunk(seq.num_tokens - seq.num_computed, budget)
            if not num_new:  # parked (async scheduling): nothing to compute
                i += 1
                continue
            while not self.kv.allocate_slots(seq, num_new):
                victim = pick_victim(running, self.victim)
                j = running.index(victim)
                if j < i:  # already scheduled this step (unless parked): give its budget back
                    if victim.status is not Status.FINISHED:
                        budget += plan.num_new[plan.seqs.index(victim)]
                        plan.remove(victim)
                    i -= 1
                del running[j]
                n -= 1
                self._preempt(victim, plan)
                if self._held is not None:
                    self._held.hold(victim, seq, running)
                if victim is seq:
                    break
            else:
                if self._async is not None:
                    self._async.allocated(seq, self._in_flight_s)
                plan.add(seq, num_new)
                budget -= num_new
                i += 1
                continue
            break  # the request preempted itself: the running pass stops
        plan.decode_tokens += decodes
        plan.kv_read_tokens += context
        return budget

    def _preempt_last(self) -> Seq:
        """Preempt the last running request in the plan being built (the lane's callback)."""
        victim = self.running.pop()
        self._preempt(victim, self._plan)
        return victim

    def _preempt(self, seq: Seq, plan: StepPlan) -> None:
        if self._async is not None and seq.status is Status.FINISHED:
            self._async.preempt(seq)  # parked: it leaves instead of waiting
            plan.preempted += 1
            return
        self.kv.free(seq)
        seq.recomputed_tokens += seq.num_computed
        seq.num_computed = 0
        seq.preemptions += 1
        self.preemption_log.preempted(seq, self._now, swap=False)
        seq.status = Status.WAITING
        self.waiting.push_front(seq)
        plan.preempted += 1

    def _schedule_waiting(self, plan: StepPlan, budget: int, now: float) -> None:
        """Admit waiting requests (vLLM 0.11 ``Scheduler.schedule``'s waiting loop). The
        long-prefill threshold caps a chunk before the chunked-prefill check; with chunked
        prefill off a request whose chunk exceeds the budget left is set aside (0.11: the
        loop goes on; the set-aside ones go back to the head afterwards, each pushed to the
        front in turn, so the last one set aside leads, as ``prepend_requests`` of a deque
        built with ``prepend_request`` does) or stops admission (``vllm_version: "0.32"``)."""
        skipped: list[Seq] = []
        self._admit(plan, budget, now, skipped)
        for seq in skipped:
            self.waiting.push_front(seq)

    def _admit(self, plan: StepPlan, budget: int, now: float, skipped: list[Seq]) -> None:
        """:meth:`_schedule_waiting`'s loop; the requests set aside go into ``skipped``."""
        waiting, running, kv, blocked = self.waiting, self.running, self.kv, self._blocked
        prefix, tiers, held = kv.prefix, self.tiers, self._held  # held: None or empty, mostly
        gpu, bs, max_seqs = kv.gpu, kv.block_size, self.max_seqs
        chunked = self.cfg.enable_chunked_prefill
        reserve_full, threshold = self.reserve_full, self._threshold
        while waiting and budget > 0 and len(running) < max_seqs:
            seq = waiting.peek()
            if (
                blocked is not None and blocked[0] is seq and blocked[1] == budget
                and gpu.free_blocks < blocked[2]
            ):  # fmt: skip
                break  # the same allocation as last time, with no more blocks free
            if held and held.still_held(seq):
                break
            if seq.remote:  # prefilled on another replica (simkv.engine.handoff)
                taken = self._admit_remote(seq, plan, now)
                if taken < 0:
                    break
                budget -= taken
                continue
            if seq.num_computed:  # its leading blocks were loaded from the KV tiers
                hits = None
                num_new = seq.num_tokens - seq.num_computed
            else:
                hits = prefix.cached_prefix(seq)
                if tiers is not None and (loads := self._load(tiers, seq, hits, now)):
                    if loads > 0:
                        continue
                    break
                num_new = seq.num_tokens - len(hits) * bs
            if 0 < threshold < num_new:
                num_new = threshold
            if num_new > budget:
                if chunked:
                    num_new = budget
                elif self._set_aside:
                    skipped.append(waiting.pop())
                    continue
                else:
                    break
            if reserve_full and not prefix.fits_whole(seq, hits):
                if not hits and prefix.cannot_hit(seq):
                    self._blocked = (seq, budget, -(-seq.num_tokens // bs))
                break
            if not kv.allocate_with_prefix(seq, hits, num_new):
                if not hits and prefix.cannot_hit(seq):  # it needs a fresh table's blocks
                    self._blocked = (seq, budget, -(-num_new // bs))
                break
            if blocked is not None and blocked[0] is seq:
                self._blocked = blocked = None  # admitted: it may come back with cache hits
            if self._async is not None:
                self._async.allocated(seq, self._in_flight_s)
            hit_tokens = seq.num_computed
            if seq.prefix_hit_tokens is None:
                seq.prefix_hit_tokens = hit_tokens
            seq.cache_hit_tokens += hit_tokens
            plan.cache_hit_tokens += hit_tokens
            waiting.pop()
            running.append(seq)
            self._mark_scheduled(seq, now)
            plan.add(seq, num_new)
            budget -= num_new

    def _check(self) -> None:
        self.kv.check([*self.running, *self.elsewhere()])
