"""Pool replay: time-averaged KV waste of a trace served FCFS in lock-step iterations.

A pool of ``pool_slots`` token slots serves the requests in order. Iteration ``t``: admit from
the queue head while the head fits (its prompt is written at once), take a
:class:`~simkv.kv.waste.WasteBreakdown` snapshot, then every resident request below its final
length (prompt + output) writes one token; requests at their final length leave.

* Contiguous schemes (:class:`~simkv.kv.contiguous.ReservationPolicy`) reserve on admission and
  free on completion; a request that cannot fit even an empty pool is skipped. The external
  fragmentation demand is the head-of-queue request's reservation.
* Paged allocates a block when a token needs one; when none is free it preempts the newest
  resident (recompute: it re-queues at the head, keeping its length). A request longer than the
  pool is skipped.

A result's ``slot_iterations`` is the sum of all snapshots until the last request leaves, so
``slot_iterations.fractions()`` are the time-averaged shares of the pool.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappop, heappush

import numpy as np

from simkv.kv.contiguous import ContiguousAllocator, ReservationPolicy
from simkv.kv.waste import CATEGORIES, WasteBreakdown, paged_breakdown

#: Called once per replay iteration with its index and snapshot (for tests and tracing).
Observer = Callable[[int, WasteBreakdown], None]


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """One scheme's replay: ``slot_iterations`` is the sum of all per-iteration snapshots."""

    scheme: str
    block_size: int | None
    requests: int
    skipped_requests: int
    preemptions: int
    iterations: int
    slot_iterations: WasteBreakdown

    def row(self) -> dict[str, object]:
        """A flat record for the replay frame; ``*_frac`` are NaN when nothing ran."""
        if self.iterations:
            fractions = self.slot_iterations.fractions()
        else:
            fractions = dict.fromkeys(CATEGORIES, float("nan"))
        row: dict[str, object] = {
            "scheme": self.scheme,
            "block_size": self.block_size,
            "requests": self.requests,
            "skipped_requests": self.skipped_requests,
            "preemptions": self.preemptions,
            "iterations": self.iterations,
        }
        row.update({f"{name}_frac": fractions[name] for name in CATEGORIES})
        return row


def _segment_sum(base: WasteBreakdown, iterations: int, growth: int) -> WasteBreakdown:
    """Sum of ``iterations`` snapshots starting at ``base`` while ``growth`` slots per
    iteration move from reservation to token states."""
    moved = growth * iterations * (iterations - 1) // 2
    return WasteBreakdown(
        base.token_slots * iterations + moved,
        base.reserved_slots * iterations - moved,
        base.internal_frag_slots * iterations,
        base.external_frag_slots * iterations,
        base.free_slots * iterations,
    )


def _set_lengths(
    pool: ContiguousAllocator, admitted: dict[int, int], prompt: list, output: list, it: int
) -> None:
    """Tell ``pool`` each resident's length at iteration ``it`` (admitted at ``admitted[r]``)."""
    for req, start in admitted.items():
        pool.set_length(req, prompt[req] + min(it - start, output[req]))


def replay_contiguous(
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    *,
    policy: ReservationPolicy,
    pool_slots: int,
    max_context_len: int,
    on_iteration: Observer | None = None,
) -> ReplayResult:
    """Replay with contiguous reservations (module docstring); requests that cannot fit even
    an empty pool are skipped. Event-driven: between completions the state only drifts (each
    resident moves one slot from reservation to token states per iteration)."""
    prompt, output = prompt_tokens.tolist(), output_tokens.tolist()
    pool = ContiguousAllocator(pool_slots, policy, max_context_len)
    queue = deque(r for r in range(len(prompt)) if pool.fits_when_empty(prompt[r], output[r]))
    skipped = len(prompt) - len(queue)
    admitted: dict[int, int] = {}
    leaves: list[tuple[int, int]] = []  # (last iteration, request), a min-heap
    total, it = WasteBreakdown.zero(), 0
    while queue or leaves:
        while queue and pool.can_reserve(prompt[queue[0]], output[queue[0]]):
            req = queue.popleft()
            pool.reserve(req, prompt[req], output[req])
            admitted[req] = it
            heappush(leaves, (it + max(output[req], 1) - 1, req))
        demand = pool.reservation_slots(prompt[queue[0]], output[queue[0]]) if queue else None
        last = leaves[0][0]
        if on_iteration is not None:
            for t in range(it, last + 1):
                _set_lengths(pool, admitted, prompt, output, t)
                on_iteration(t, pool.breakdown(demand))
        _set_lengths(pool, admitted, prompt, output, it)
        total += _segment_sum(pool.breakdown(demand), last - it + 1, len(admitted))
        while leaves and leaves[0][0] == last:
            req = heappop(leaves)[1]
            pool.release(req)
            del admitted[req]
        it = last + 1
    served = len(prompt) - skipped
    return ReplayResult(str(pool.policy), None, served, skipped, 0, it, total)


@dataclass(slots=True)
class _Seq:
    req: int
    length: int
    final: int
    blocks: int


class _PagedPool:
    """Block counts of a paged replay with running totals (O(1) snapshots)."""

    def __init__(self, total_blocks: int, block_size: int) -> None:
        self.total_blocks, self.block_size = total_blocks, block_size
        self.free_blocks, self.tokens, self.internal = total_blocks, 0, 0
        self.running: list[_Seq] = []

    def _slack(self, seq: _Seq) -> int:
        return max(0, seq.blocks * self.block_size - seq.final)

    def add(self, seq: _Seq, sign: int) -> None:
        """Count ``seq`` in (``sign`` 1) or out (-1) of the totals."""
        self.free_blocks -= sign * seq.blocks
        self.tokens += sign * seq.length
        self.internal += sign * self._slack(seq)

    def grow(self, seq: _Seq) -> None:
        """Give ``seq`` one more block (caller ensured one is free)."""
        self.add(seq, -1)
        seq.blocks += 1
        self.add(seq, 1)

    def snapshot(self) -> WasteBreakdown:
        held = (self.total_blocks - self.free_blocks) * self.block_size
        reserved = held - self.tokens - self.internal
        free = self.free_blocks * self.block_size
        return WasteBreakdown(self.tokens, reserved, self.internal, 0, free)

    def exact(self) -> WasteBreakdown:
        """The same snapshot recomputed from scratch by :func:`paged_breakdown`."""
        cols = np.array([(s.length, s.final, s.blocks) for s in self.running], np.int64)
        cols = cols.reshape(-1, 3).T
        return paged_breakdown(
            cols[0], cols[1], cols[2], block_size=self.block_size, total_blocks=self.total_blocks
        )


def _paged_step(pool: _PagedPool, queue: deque[tuple[int, int]]) -> int:
    """Every resident writes one token (oldest first), preempting the newest resident when a
    block is needed and none is free; finished requests leave. Returns the preemptions."""
    preempted = 0
    running, i = pool.running, 0
    while i < len(running):
        seq = running[i]
        if seq.length < seq.final and seq.length == seq.blocks * pool.block_size:
            while pool.free_blocks == 0:
                victim = running.pop()
                pool.add(victim, -1)
                queue.appendleft((victim.req, victim.length))
                preempted += 1
                if victim is seq:
                    break
            if pool.free_blocks == 0 or i >= len(running):
                break
            pool.grow(seq)
        if seq.length < seq.final:
            seq.length += 1
            pool.tokens += 1
        if seq.length == seq.final:
            pool.add(running.pop(i), -1)
        else:
            i += 1
    return preempted


def replay_paged(
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    *,
    pool_slots: int,
    block_size: int,
    on_iteration: Observer | None = None,
) -> ReplayResult:
    """Replay with paged blocks (module docstring); requests longer than the pool are skipped."""
    if pool_slots % block_size:
        raise ValueError(f"pool_slots {pool_slots} is not a multiple of block_size {block_size}")
    pool = _PagedPool(pool_slots // block_size, block_size)
    final = (prompt_tokens + output_tokens).tolist()
    queue = deque((r, int(p)) for r, p in enumerate(prompt_tokens) if final[r] <= pool_slots)
    skipped = len(final) - len(queue)
    total, it, preemptions = WasteBreakdown.zero(), 0, 0
    while queue or pool.running:
        while queue and -(-queue[0][1] // block_size) <= pool.free_blocks:
            req, length = queue.popleft()
            seq = _Seq(req, length, final[req], -(-length // block_size))
            pool.running.append(seq)
            pool.add(seq, 1)
        if on_iteration is not None:
            on_iteration(it, pool.exact())
        total += pool.snapshot()
        preemptions += _paged_step(pool, queue)
        it += 1
    served = len(final) - skipped
    return ReplayResult("paged", block_size, served, skipped, preemptions, it, total)
