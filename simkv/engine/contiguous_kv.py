"""Contiguous per-request KV reservations as the Orca and static schedulers see them.

Wraps :class:`~simkv.kv.contiguous.ContiguousAllocator` (a buddy allocator, so external
fragmentation is real). ``demand_slots`` is the head-of-queue request's reservation, set by the
scheduler each step: free space in chunks smaller than it is external fragmentation.
"""

from __future__ import annotations

from simkv.engine.plan import StepPlan
from simkv.engine.queues import FcfsQueue
from simkv.engine.scheduler import SchedulerBase
from simkv.engine.sequence import Seq
from simkv.kv.contiguous import ContiguousAllocator, ReservationPolicy
from simkv.kv.waste import WasteBreakdown
from simkv.metrics.recorder import Recorder


class ContiguousKV:
    """Reserve on admission, write tokens into the reservation, release on completion."""

    def __init__(
        self, capacity_slots: int, policy: ReservationPolicy | str, max_context_len: int
    ) -> None:
        self.alloc = ContiguousAllocator(capacity_slots, ReservationPolicy(policy), max_context_len)
        self.demand_slots: int | None = None

    def reservation_slots(self, seq: Seq) -> int:
        return self.alloc.reservation_slots(seq.prompt_tokens, seq.output_tokens)

    def fits_when_empty(self, seq: Seq) -> bool:
        return self.alloc.fits_when_empty(seq.prompt_tokens, seq.output_tokens)

    def can_reserve(self, seq: Seq) -> bool:
        return self.alloc.can_reserve(seq.prompt_tokens, seq.output_tokens)

    def reserve(self, seq: Seq) -> None:
        chunk = self.alloc.reserve(seq.req_id, seq.prompt_tokens, seq.output_tokens)
        self.alloc.set_length(seq.req_id, 0)
        seq.reserved_slots = chunk.size

    def commit(self, plan: StepPlan) -> None:
        """Record the step's writes (before the scheduler advances ``num_computed``)."""
        for seq, num_new in zip(plan.seqs, plan.num_new, strict=True):
            self.alloc.set_length(seq.req_id, seq.num_computed + num_new)

    def free(self, seq: Seq) -> None:
        self.alloc.release(seq.req_id)

    @property
    def used_slots(self) -> int:
        return self.alloc.capacity_slots - self.alloc.buddy.free_slots

    @property
    def free_slots(self) -> int:
        return self.alloc.buddy.free_slots

    def breakdown(self) -> WasteBreakdown:
        return self.alloc.breakdown(self.demand_slots)

    def memory_row(self) -> tuple[int, ...]:
        """:meth:`~simkv.engine.paged_kv.PagedKV.memory_row` in slots: used and free slots,
        the waste split; no CPU pool, no sharing, no cache."""
        return self.used_slots, self.free_slots, *self.breakdown().values(), 0, 0, 0, 0

    def check(self) -> None:
        self.alloc.buddy.check()


class ContiguousSchedulerBase(SchedulerBase):
    """FCFS over contiguous reservations: a request that can never fit is rejected on arrival."""

    def __init__(self, kv: ContiguousKV, recorder: Recorder) -> None:
        super().__init__(kv, recorder, FcfsQueue())
        self.kv: ContiguousKV = kv

    def add(self, seq: Seq, now: float) -> None:
        if not self.kv.fits_when_empty(seq):
            self._reject(seq, "kv_never_fits", now)
            return
        self.waiting.push(seq)

    def _admit_head(self, now: float) -> Seq:
        """Admit the waiting head (its reservation fits: ``kv.can_reserve``); returns it."""
        seq = self.waiting.pop()
        self.kv.reserve(seq)
        self.running.append(seq)
        self._mark_scheduled(seq, now)
        return seq

    def _set_demand(self) -> None:
        """External fragmentation is judged against the head-of-queue request's reservation."""
        waiting = self.waiting
        self.kv.demand_slots = self.kv.reservation_slots(waiting.peek()) if len(waiting) else None

    def _check(self) -> None:
        self.kv.check()
