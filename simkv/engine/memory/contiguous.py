"""Contiguous per-request KV reservations as the Orca and static schedulers see them
(:mod:`simkv.engine.schedulers.contiguous`).

Wraps :class:`~simkv.kv.contiguous.ContiguousAllocator` (a buddy allocator, so external
fragmentation is real). ``demand_slots`` is the head-of-queue request's reservation, set by the
scheduler each step: free space in chunks smaller than it is external fragmentation.
"""

from __future__ import annotations

from collections.abc import Callable

from simkv.engine.request.plan import StepPlan
from simkv.engine.request.seq import Seq
from simkv.kv.contiguous import ContiguousAllocator, ReservationPolicy
from simkv.kv.waste import WasteBreakdown


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

    def cached_prefix_tokens(self, probe: Callable[[], Seq]) -> int:
        """No prefix cache: nothing is ever cached."""
        return 0

    def breakdown(self) -> WasteBreakdown:
        return self.alloc.breakdown(self.demand_slots)

    def memory_row(self) -> tuple[int, ...]:
        """:meth:`~simkv.engine.memory.paged.PagedKV.memory_row` in slots: used and free slots,
        the waste split; no CPU pool, no sharing, no cache."""
        return self.used_slots, self.free_slots, *self.breakdown().values(), 0, 0, 0, 0

    def check(self) -> None:
        self.alloc.buddy.check()
