"""Block shortages of the decode lane, replayed exactly as the step-by-step pass meets them
under the ``newest`` victim policy (:meth:`DecodeCohort.take_blocks
<simkv.engine.lazy.cohort.DecodeCohort.take_blocks>` calls these when fewer blocks are free
than the members need; the common case stays there).

Both replays walk the members in running order and, while no block is free, preempt the last
running request (``preempt_last`` removes and preempts ``running[-1]`` and returns it; a member
leaves the cohort first, :meth:`DecodeCohort.preempted`) until a block is free or the member
itself was the victim (then the step's pass over the running list ends, as the plain one does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from simkv.engine.lazy.calendar import by_order
from simkv.engine.request.seq import Seq
from simkv.kv.allocator import BlockAllocator, BlockId


class Growing(Protocol):
    """The paged memory as a replay grows its members' tables (``PagedKV``)."""

    gpu: BlockAllocator

    def grow_decodes(self, seqs: list[Seq], blocks: list[BlockId]) -> bool: ...


class Cohort(Protocol):
    """What a replay reads and calls of :class:`~simkv.engine.lazy.cohort.DecodeCohort`."""

    @property
    def kv(self) -> Growing: ...
    @property
    def size(self) -> int: ...

    def book_block(self, tick: int, seq: Seq) -> None: ...
    def preempted(self, seq: Seq) -> None: ...


def replay_short(
    cohort: Cohort, due: list[Seq], nxt: int, running: list[Seq],
    preempt_last: Callable[[], Seq],
) -> None:  # fmt: skip
    """Fewer blocks are free than members at a block boundary (``due``, popped from the
    block calendar; those that still decode after this block are booked again at ``nxt``):
    only a member taking a block can run short."""
    kv, gpu = cohort.kv, cohort.kv.gpu
    due.sort(key=by_order)  # who runs short first matters now
    i, n = 0, len(due)
    while i < n:
        seq = due[i]
        if not seq.lazy:  # preempted while making room for an earlier member
            i += 1
            continue
        while gpu.free_blocks == 0:
            if len(running) <= cohort.size:
                cohort.preempted(running[-1])
            if preempt_last() is seq:
                return  # the member preempted itself: it was the last running request
        # while blocks are free nobody is preempted: the next members (as many as there
        # are free blocks) take theirs in one pop, in the order single pops would give
        take: list[Seq] = []
        free = gpu.free_blocks
        while i < n and len(take) < free:
            if due[i].lazy:
                take.append(due[i])
            i += 1
        kv.grow_decodes(take, gpu.alloc_many(len(take)))
        for member in take:
            if nxt <= member.end_tick:
                cohort.book_block(nxt, member)


def replay_worst_case(
    cohort: Cohort, due: list[Seq], nxt: int, running: list[Seq],
    preempt_last: Callable[[], Seq],
) -> None:  # fmt: skip
    """Under ``worst_case`` (vLLM 0.6's ``can_append_slots``: every decode needs a free block)
    some member may find none: every member in running order, then its block if it is at a
    boundary (in ``due``). O(members): only in steps where a decode may fall short."""
    kv, gpu = cohort.kv, cohort.kv.gpu
    due.sort(key=by_order)
    j, n = 0, len(due)
    i = 0
    while i < cohort.size:  # preemptions shrink the cohort from its end
        seq = running[i]
        while gpu.free_blocks == 0:
            if len(running) <= cohort.size:
                cohort.preempted(running[-1])
            if preempt_last() is seq:
                return  # the member preempted itself: it was the last running request
        if j < n and due[j] is seq:
            kv.grow_decodes([seq], gpu.alloc_many(1))
            if nxt <= seq.end_tick:
                cohort.book_block(nxt, seq)
            j += 1
        i += 1
