"""vLLM V0 scheduler, following vLLM 0.6.3's default ``Scheduler._schedule_default``.

Chunked prefill off (the 0.6 default for ordinary context lengths), block manager v2 semantics
(``core/block_manager_v2.py``, the default of 0.6.3: a decode takes a new block only when its
trailing block is full, but may run only while one block per sequence is free:
``can_append_slots`` counts every appended token as touching a block). A step is prefill-only or
decode-only:

1. If nothing is swapped out, admit waiting requests FCFS as whole prompts while the token budget
   (``max_num_batched_tokens``) and ``max_num_seqs`` allow and the block manager answers OK with
   the watermark kept free. LATER stops admission; NEVER rejects the request (counted, not
   crashed on). A step that admitted any prefill runs only those prefills.
2. Otherwise decode every running request (one token each), in admission order. While fewer
   blocks are free than the request has sequences (the worst case above, even when its tokens
   fit in its own blocks), preempt a victim among those not yet scheduled this step
   (``newest`` = the most recently admitted, vLLM's choice), or the request itself when it is
   the last. Mode:
   ``recompute`` (back to the head of the waiting queue), ``swap`` (to the CPU pool; when the
   pool is full the request is aborted with a recorded reason, where vLLM raises), or ``auto``
   (recompute for single-sequence requests, swap for multi-sequence ones).
3. If nobody was preempted, swap requests back in (before any new prefill), each decoding in
   this step.

Multi-sequence requests (:mod:`simkv.engine.memory.forks`, vLLM 0.6 ``SequenceGroup``): the
prompt is computed once; the group forks (lazy copy-on-write) right after the step that sampled
its ``fork_after + 1``-th token; each live sequence then decodes one token per decode step and
``max_num_seqs`` counts sequences (``n`` per group, as vLLM's ``get_max_num_running_seqs``). A
group's decode takes slots for all its sequences at once (copies counted in the plan's
``copy_blocks``), or preempts. A forked group is always preempted by swap, all its tables as one
swap group (vLLM 0.6 cannot recompute a multi-sequence group: it asserts). Beam groups re-draw
their beams after each decode step with the scheduler's ``rng``.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from simkv.config.policy import PreemptionConfig, VllmV0Config, v0_budget
from simkv.config.sim import SimConfig
from simkv.engine.capacity import KVSizing
from simkv.engine.lazy import DecodeLane
from simkv.engine.memory.forks import block_usage
from simkv.engine.memory.paged import PagedKV
from simkv.engine.queues import FcfsQueue, pick_victim
from simkv.engine.registry import paged_memory, register
from simkv.engine.request.plan import StepPlan
from simkv.engine.request.seq import Seq, Status, group_of, is_forked, record_done
from simkv.engine.scheduler import SchedulerBase
from simkv.kv.allocator import InvariantViolation
from simkv.kv.swap import AllocStatus
from simkv.metrics.recorder import Recorder


@register(VllmV0Config)
class VllmV0Scheduler(SchedulerBase):
    """Waiting / running / swapped queues with watermark admission (vLLM 0.6).

    ``rng`` draws beam parents (the run's Generator; a fresh ``default_rng(0)`` when None).
    """

    supports_forks = True
    uses_lane = True
    worst_case_decode = True

    def __init__(
        self,
        cfg: VllmV0Config,
        preemption: PreemptionConfig,
        kv: PagedKV,
        recorder: Recorder,
        *,
        max_model_len: int,
        rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__(kv, recorder, FcfsQueue())
        self.kv: PagedKV = kv
        self.cfg = cfg
        self.preemption = preemption
        self.max_batched_tokens = v0_budget(cfg, max_model_len)
        self.prompt_limit = min(max_model_len, self.max_batched_tokens)
        self.watermark_blocks = int(cfg.watermark * kv.gpu.num_blocks)
        self.swapped: deque[Seq] = deque()
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.groups: list[Seq] = []  # multi-sequence requests not yet done
        self._decoded_groups: list[Seq] = []  # forked groups decoded in the current step
        self._copies = 0  # copy-on-write copies of the group whose slots were just taken
        self._step: tuple[StepPlan, float] = (StepPlan(), 0.0)  # plan being built, its start

    @classmethod
    def build(
        cls, cfg: SimConfig, sizing: KVSizing, recorder: Recorder, rng: np.random.Generator
    ) -> VllmV0Scheduler:
        return cls(
            cfg.scheduler, cfg.preemption, paged_memory(cfg, sizing), recorder,  # type: ignore[arg-type]
            max_model_len=cfg.model.max_model_len, rng=rng,
        )  # fmt: skip

    def add(self, seq: Seq, now: float) -> None:
        if seq.group is not None:
            self.groups.append(seq)
        super().add(seq, now)

    def has_work(self) -> bool:
        return bool(self.running) or len(self.waiting) > 0 or bool(self.swapped)

    def schedule(self, now: float) -> StepPlan:
        plan = StepPlan()
        self._decoded_groups.clear()
        if not self.swapped:
            self._schedule_prefills(plan, now)
        if plan.empty:
            self._schedule_running(plan, now)
            if not plan.preempted and self._schedule_swapped(plan, now) and plan.empty:
                self._schedule_prefills(plan, now)  # a dropped group was all that blocked them
        return plan

    def _schedule_prefills(self, plan: StepPlan, now: float) -> None:
        waiting = self.waiting
        budget = self.max_batched_tokens
        num_seqs = self._running_seqs()
        while len(waiting):
            seq = waiting.peek()
            num_new = seq.num_tokens
            if num_new > self.prompt_limit:
                self._reject(waiting.pop(), "prompt_exceeds_limit", now)
                continue
            width = _width(seq)
            if width > self.cfg.max_num_seqs:  # vLLM would leave it waiting forever
                self._reject(waiting.pop(), "n_exceeds_max_num_seqs", now)
                continue
            status = self.kv.can_allocate(seq, self.watermark_blocks)
            if status is AllocStatus.LATER:
                break
            if status is AllocStatus.NEVER:
                self._reject(waiting.pop(), "kv_never_fits", now)
                continue
            if num_new > budget or num_seqs + width > self.cfg.max_num_seqs:
                break
            waiting.pop()
            if not self.kv.allocate_slots(seq, num_new):
                raise InvariantViolation(f"{seq}: can_allocate said OK, the allocation failed")
            self.running.append(seq)
            self._mark_scheduled(seq, now)
            plan.add(seq, num_new)
            budget -= num_new
            num_seqs += width

    def decode_run(self) -> DecodeLane | None:
        """Also nothing swapped out and no multi-sequence request."""
        if self.waiting or self.swapped or self.groups:
            return None
        return super().decode_run()

    def _schedule_running(self, plan: StepPlan, now: float) -> None:
        """Decode every running request; the lane's members (if any) first, as one block.

        Victims come from the requests not yet scheduled (never a member); under ``newest``
        the lane replays a block shortage exactly, otherwise a shortage among the members
        makes it flush."""
        start, lane = 0, self.lane
        if lane is not None and lane.size:
            self._step = plan, now
            newest = self.preemption.victim == "newest"
            preempt_last = self._preempt_last if newest else None
            start = lane.plan_members(plan, self.running, fits=True, preempt_last=preempt_last)
            if start and start == len(self.running):
                return  # every running request is a member
        queue = deque(self.running[start:]) if start else deque(self.running)
        kept: list[Seq] = self.running[:start]
        fits_in_place, gpu = self.kv.decode_fits_in_place, self.kv.gpu
        free = gpu.free_blocks  # changes only where a block is taken or a victim freed some
        while queue:
            seq = queue.popleft()
            group = seq.group
            single = group is None or not group.tables
            # vLLM 0.6's can_append_slots: one free block per sequence (worst case)
            touched = 1 if single else len(group.tables)  # type: ignore[union-attr]
            if free < touched:
                room = self._make_room(seq, touched, queue, plan, now)
                free = gpu.free_blocks
                if not room:
                    continue  # seq itself was the victim
            if fits_in_place(seq):  # hot path: a decode into its own trailing block
                plan.add_decode(seq)
                kept.append(seq)
                continue
            self._decode(seq, single, plan)
            kept.append(seq)
            free = gpu.free_blocks
        self.running = kept

    def _decode(self, seq: Seq, single: bool, plan: StepPlan) -> None:
        """Take ``seq``'s decode slots, a block per sequence being free (checked before), and
        plan its decode; ``single``: not a forked group."""
        if not (self.kv.allocate_slots(seq, 1) if single else self._group_slots(seq, 1)):
            raise InvariantViolation(f"{seq}: a free block per sequence, yet no decode slot")
        if single:
            plan.add_decode(seq)
        else:
            self._add_group_decode(seq, plan)

    def _make_room(
        self, seq: Seq, touched: int, queue: deque[Seq], plan: StepPlan, now: float
    ) -> bool:
        """Preempt victims among the requests not yet scheduled (``queue``), else ``seq``
        itself, until ``touched`` blocks are free (vLLM 0.6 ``Scheduler._schedule_running``'s
        loop on ``BlockSpaceManagerV2.can_append_slots``); False when ``seq`` was the victim."""
        gpu = self.kv.gpu
        while gpu.free_blocks < touched:
            victim = pick_victim(queue, self.preemption.victim) if queue else seq
            if victim is not seq:
                queue.remove(victim)
            self._preempt(victim, plan, now)
            if victim is seq:
                return False
        return True

    def _group_slots(self, seq: Seq, num_new: int) -> bool:
        """One decode slot for every sequence of a forked group (``num_new`` is 1); False, with
        nothing changed, if short. Copy-on-write copies go to the step's ``copy_blocks``."""
        copies = self.kv.forks.decode_slots(seq)
        if copies is None:
            return False
        self._copies += copies
        return True

    def _add_group_decode(self, seq: Seq, plan: StepPlan) -> None:
        plan.add_group_decodes(seq, len(group_of(seq).tables))
        plan.copy_blocks += self._copies
        self._copies = 0
        self._decoded_groups.append(seq)

    def _running_seqs(self) -> int:
        """Sequences of the running requests (a multi-sequence request counts ``n``)."""
        if not self.groups:
            return len(self.running)
        return sum(_width(seq) for seq in self.running)

    def _preempt_last(self) -> Seq:
        """Preempt the last running request in the step being built (the lane's callback)."""
        victim = self.running.pop()
        self._preempt(victim, *self._step)
        return victim

    def _preempt(self, seq: Seq, plan: StepPlan, now: float) -> None:
        plan.preempted += 1
        seq.preemptions += 1
        swap = self.preemption.mode == "swap" or is_forked(seq)
        self.preemption_log.preempted(seq, now, swap)
        if not swap:
            self.kv.free(seq)
            seq.recomputed_tokens += seq.num_computed
            seq.num_computed = 0
            seq.status = Status.WAITING
            self.waiting.push_front(seq)
            return
        if self.kv.swap.can_swap_out(seq) is not AllocStatus.OK:
            self._abort(seq, "swap_space_exhausted", now)
            return
        blocks = self.kv.swap.swap_out(seq)
        plan.swap_out_blocks += blocks
        seq.swaps += 1
        seq.swapped_bytes += blocks * self.kv.block_bytes
        seq.status = Status.SWAPPED
        self.swapped.append(seq)

    def stall_advice(self) -> str:
        """The watermark's advice when it alone keeps the head (swapped first) out."""
        head = self.swapped[0] if self.swapped else self.waiting.peek() if self.waiting else None
        can = self.kv.swap.can_swap_in if self.swapped else self.kv.can_allocate
        kept = self.watermark_blocks
        if head is None or (can(head, kept), can(head, 0)) != (AllocStatus.LATER, AllocStatus.OK):
            return super().stall_advice()
        which = "swapped" if self.swapped else "waiting"
        return (f"the {which} head would fit but for the {kept} blocks scheduler.watermark "
                f"({self.cfg.watermark:g}) keeps free: lower scheduler.watermark, or give the KV "
                "cache more blocks")  # fmt: skip

    def _schedule_swapped(self, plan: StepPlan, now: float) -> bool:
        """Swap requests back in while they fit; True when one was dropped and none is left."""
        swapped = self.swapped
        dropped = False
        while swapped:
            seq = swapped[0]
            status = self.kv.swap.can_swap_in(seq, self.watermark_blocks)
            if status is AllocStatus.LATER:
                break
            if status is AllocStatus.NEVER:  # only a forked group outgrows the whole GPU pool
                self._drop_swapped(swapped.popleft(), now)
                dropped = True
                continue
            if self._running_seqs() + _width(seq) > self.cfg.max_num_seqs:
                break
            swapped.popleft()
            blocks = self.kv.swap.swap_in(seq)
            plan.swap_in_blocks += blocks
            seq.swapped_bytes += blocks * self.kv.block_bytes
            seq.status = Status.RUNNING
            self.preemption_log.resumed(seq, now)
            self._decode(seq, not is_forked(seq), plan)  # can_swap_in counted its slots
            self.running.append(seq)
        return dropped and not swapped

    def _drop_swapped(self, seq: Seq, now: float) -> None:
        """Abort a swapped-out group whose next decode can never fit on the GPU (vLLM ignores
        such a group with a warning)."""
        if not is_forked(seq):  # max_model_len fits the cache (checked at start-up)
            raise InvariantViolation(f"{seq}: a single sequence can never outgrow the GPU pool")
        self.kv.swap.free_swapped(seq)
        seq.status = Status.ABORTED
        seq.reason = "kv_never_fits"
        seq.finish_s = now
        record_done(self.recorder, seq)

    def complete(self, plan: StepPlan, now: float) -> None:
        """Apply the step, then fork the groups that reached their fork point and re-draw the
        beams of the beam groups that decoded."""
        super().complete(plan, now)
        if self.groups:
            self._after_group_step()

    def _after_group_step(self) -> None:
        for seq in self._decoded_groups:
            group = group_of(seq)
            if group.beam and seq.status is Status.RUNNING:
                picks = self.rng.integers(len(group.tables), size=len(group.tables))
                self.kv.forks.reshuffle_beams(seq, picks.tolist())
        for seq in self.groups:
            group = group_of(seq)
            forks_now = not group.tables and seq.num_output > group.fork_after
            if forks_now and seq.status is Status.RUNNING:
                self.kv.forks.fork(seq)
        done = (Status.FINISHED, Status.REJECTED, Status.ABORTED)
        self.groups = [seq for seq in self.groups if seq.status not in done]

    def fork_state(self) -> tuple[int, int]:
        """(distinct blocks of the GPU-resident forked groups, blocks they would hold unshared)."""
        if not self.groups:
            return 0, 0
        return block_usage([s for s in self.groups if s.status is Status.RUNNING])

    def _check(self) -> None:
        self.kv.check(self.running, self.swapped)


def _width(seq: Seq) -> int:
    """Sequences ``seq`` may run (vLLM's ``get_max_num_running_seqs``): ``n`` for a group."""
    return 1 if seq.group is None else seq.group.n
