"""Waiting queues (FCFS and priority) and preemption-victim policies, shared by schedulers."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from typing import Literal, Protocol

from simkv.config.policy import VictimPolicy
from simkv.engine.request.seq import Seq


class WaitingQueue(Protocol):
    """Requests waiting for admission. ``push_front`` is where preempted requests go."""

    def push(self, seq: Seq) -> None: ...
    def push_front(self, seq: Seq) -> None: ...
    def peek(self) -> Seq: ...
    def pop(self) -> Seq: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Seq]: ...


class FcfsQueue(deque[Seq]):
    """First come, first served; preempted requests go back to the head (as vLLM does).

    A deque with the queue's method names (so ``len`` and truth tests cost no Python call).
    """

    push = deque.append
    push_front = deque.appendleft
    pop = deque.popleft  # type: ignore[assignment]

    def peek(self) -> Seq:
        return self[0]


class OrderedQueue:
    """Ordered by ``(rank(seq), arrival_s, req_id)``: lower first (a heap). A request's rank
    is taken when it is pushed; a preempted request simply re-enters at its place.

    ``rank=priority`` is vLLM's priority policy (:func:`make_queue`).
    """

    def __init__(self, rank: Callable[[Seq], int]) -> None:
        self._rank = rank
        self._heap: list[tuple[int, float, int, Seq]] = []

    def push(self, seq: Seq) -> None:
        heapq.heappush(self._heap, (self._rank(seq), seq.arrival_s, seq.req_id, seq))

    push_front = push

    def peek(self) -> Seq:
        return self._heap[0][3]

    def pop(self) -> Seq:
        return heapq.heappop(self._heap)[3]

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[Seq]:
        """The queued requests, in no particular order."""
        return (entry[3] for entry in self._heap)


def make_queue(policy: Literal["fcfs", "priority"]) -> WaitingQueue:
    """The waiting queue for a queue policy name."""
    return OrderedQueue(attrgetter("priority")) if policy == "priority" else FcfsQueue()


def _index_of_victim(candidates: Sequence[Seq], key: Callable[[int, Seq], object]) -> int:
    return max(range(len(candidates)), key=lambda i: key(i, candidates[i]))


_VICTIM_KEYS: dict[str, Callable[[int, Seq], object]] = {
    # ``candidates`` are in admission order, so a larger index is a more recently admitted one.
    "newest": lambda i, s: i,
    "oldest": lambda i, s: -i,
    "longest": lambda i, s: (s.num_computed, i),
    "fewest_blocks": lambda i, s: (-len(s.table.block_ids), i),
    # vLLM: max over (priority, arrival_time); its arrival times differ by add order, which
    # simkv's request ids follow when arrival times are equal
    "lowest_priority": lambda i, s: (s.priority, s.arrival_s, s.req_id, i),
}


def pick_victim(candidates: Sequence[Seq], policy: VictimPolicy) -> Seq:
    """The request to preempt among ``candidates`` (admission order, non-empty).

    ``newest`` is vLLM's choice under FCFS (the most recently admitted running request);
    ``lowest_priority`` is vLLM 0.11's under the priority policy (largest priority value, then
    latest arrival, the later request of equal arrival times). Other ties go to the most
    recently admitted.
    """
    if policy == "newest":
        return candidates[-1]
    return candidates[_index_of_victim(candidates, _VICTIM_KEYS[policy])]
