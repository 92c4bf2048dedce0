"""What the contiguous-memory policies (Orca, static batching) share: FCFS admission over
contiguous reservations (:class:`~simkv.engine.memory.contiguous.ContiguousKV`)."""

from __future__ import annotations

from simkv.engine.memory.contiguous import ContiguousKV
from simkv.engine.queues import FcfsQueue
from simkv.engine.request.seq import Seq
from simkv.engine.scheduler import SchedulerBase
from simkv.metrics.recorder import Recorder


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
