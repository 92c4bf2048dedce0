"""vLLM V0 scheduler, following vLLM 0.6's default ``Scheduler._schedule_default``.

Chunked prefill off (the 0.6 default for ordinary context lengths), block manager v2 semantics
(a decode needs a new block only when its trailing block is full). A step is prefill-only or
decode-only:

1. If nothing is swapped out, admit waiting requests FCFS as whole prompts while the token budget
   (``max_num_batched_tokens``) and ``max_num_seqs`` allow and the block manager answers OK with
   the watermark kept free. LATER stops admission; NEVER rejects the request (counted, not
   crashed on). A step that admitted any prefill runs only those prefills.
2. Otherwise decode every running request (one token each), in admission order. When a request
   cannot get its slot, preempt a victim among those not yet scheduled this step (``newest`` =
   the most recently admitted, vLLM's choice), or the request itself when it is the last. Mode:
   ``recompute`` (back to the head of the waiting queue), ``swap`` (to the CPU pool; when the
   pool is full the request is aborted with a recorded reason, where vLLM raises), or ``auto``
   (recompute for single-sequence requests, swap for multi-sequence ones).
3. If nobody was preempted, swap requests back in (before any new prefill), each decoding in
   this step.
"""

from __future__ import annotations

from collections import deque

from simkv.config.policy import PreemptionConfig, VllmV0Config
from simkv.engine.paged_kv import AllocStatus, PagedKV
from simkv.engine.plan import StepPlan
from simkv.engine.queues import FcfsQueue, pick_victim
from simkv.engine.scheduler import SchedulerBase
from simkv.engine.sequence import Seq, Status
from simkv.kv.swap import SwapDecision
from simkv.metrics.recorder import Recorder


class VllmV0Scheduler(SchedulerBase):
    """Waiting / running / swapped queues with watermark admission (vLLM 0.6)."""

    def __init__(
        self,
        cfg: VllmV0Config,
        preemption: PreemptionConfig,
        kv: PagedKV,
        recorder: Recorder,
        *,
        max_model_len: int,
    ) -> None:
        super().__init__(kv, recorder, FcfsQueue())
        self.kv: PagedKV = kv
        self.cfg = cfg
        self.preemption = preemption
        self.max_batched_tokens = cfg.max_num_batched_tokens or max(max_model_len, 2048)
        self.prompt_limit = min(max_model_len, self.max_batched_tokens)
        self.watermark_blocks = int(cfg.watermark * kv.gpu.num_blocks)
        self.swapped: deque[Seq] = deque()

    def has_work(self) -> bool:
        return bool(self.running) or len(self.waiting) > 0 or bool(self.swapped)

    def queue_lengths(self) -> tuple[int, int, int]:
        return len(self.waiting), len(self.running), len(self.swapped)

    def memory_state(self) -> tuple[int, int, int]:
        return self.kv.gpu.used_blocks, self.kv.gpu.free_blocks, self.kv.cpu_blocks_used

    def schedule(self, now: float) -> StepPlan:
        plan = StepPlan()
        if not self.swapped:
            self._schedule_prefills(plan, now)
        if plan.empty:
            self._schedule_running(plan, now)
            if not plan.preempted:
                self._schedule_swapped(plan, now)
        return plan

    def _schedule_prefills(self, plan: StepPlan, now: float) -> None:
        waiting = self.waiting
        budget = self.max_batched_tokens
        num_seqs = len(self.running)
        while len(waiting):
            seq = waiting.peek()
            num_new = seq.num_tokens
            if num_new > self.prompt_limit:
                self._reject(waiting.pop(), "prompt_exceeds_limit", now)
                continue
            status = self.kv.can_allocate(seq, self.watermark_blocks)
            if status is AllocStatus.LATER:
                break
            if status is AllocStatus.NEVER:
                self._reject(waiting.pop(), "kv_never_fits", now)
                continue
            if num_new > budget or num_seqs + 1 > self.cfg.max_num_seqs:
                break
            waiting.pop()
            ok = self.kv.allocate_slots(seq, num_new)
            assert ok, "can_allocate said OK"
            self.running.append(seq)
            self._mark_scheduled(seq, now)
            plan.add(seq, num_new)
            budget -= num_new
            num_seqs += 1

    def _schedule_running(self, plan: StepPlan, now: float) -> None:
        queue = deque(self.running)
        kept: list[Seq] = []
        fits_in_place = self.kv.decode_fits_in_place
        while queue:
            seq = queue.popleft()
            if fits_in_place(seq):  # hot path: a decode into its own trailing block
                plan.add_decode(seq)
                kept.append(seq)
                continue
            while not self.kv.allocate_slots(seq, 1):
                victim = pick_victim(queue, self.preemption.victim) if queue else seq
                if victim is not seq:
                    queue.remove(victim)
                self._preempt(victim, plan, now)
                if victim is seq:
                    break
            else:
                plan.add_decode(seq)
                kept.append(seq)
        self.running = kept

    def _preempt(self, seq: Seq, plan: StepPlan, now: float) -> None:
        plan.preempted += 1
        seq.preemptions += 1
        if self.preemption.mode != "swap":  # auto: every simulated request has one sequence
            self.kv.free(seq)
            seq.recomputed_tokens += seq.num_computed
            seq.num_computed = 0
            seq.status = Status.WAITING
            self.waiting.push_front(seq)
            return
        if self.kv.can_swap_out(seq) is not SwapDecision.OK:
            self._abort(seq, "swap_space_exhausted", now)
            return
        blocks = self.kv.swap_out(seq)
        plan.swap_out_blocks += blocks
        seq.swaps += 1
        seq.swapped_bytes += blocks * self.kv.block_bytes
        seq.status = Status.SWAPPED
        self.swapped.append(seq)

    def _schedule_swapped(self, plan: StepPlan, now: float) -> None:
        swapped = self.swapped
        while swapped:
            seq = swapped[0]
            status = self.kv.can_swap_in(seq, self.watermark_blocks)
            if status is AllocStatus.LATER:
                break
            assert status is not AllocStatus.NEVER, "it came from this GPU pool"
            if len(self.running) + 1 > self.cfg.max_num_seqs:
                break
            swapped.popleft()
            blocks = self.kv.swap_in(seq)
            plan.swap_in_blocks += blocks
            seq.swapped_bytes += blocks * self.kv.block_bytes
            seq.status = Status.RUNNING
            if not self.kv.allocate_slots(seq, 1):
                raise AssertionError("swap-in kept the watermark free, the decode slot must fit")
            plan.add_decode(seq)
            self.running.append(seq)

    def check(self) -> None:
        self.kv.check(self.running, self.swapped)
