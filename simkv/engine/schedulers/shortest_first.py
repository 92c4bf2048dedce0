"""Shortest-first admission: vLLM V1's step rules, waiting requests ordered by work.

The worked example of ``docs/architecture.md``: a new paged policy in one module. It keeps
everything of :class:`~simkv.engine.schedulers.vllm_v1.VllmV1Scheduler` (token budget,
chunked prefill, recompute preemption, prefix caching, the decode lane) and changes only the
waiting queue: the request with the fewest tokens to compute (``num_tokens``: its prompt, plus
what it generated before a preemption) is admitted first; ties go to the earlier arrival. A
preempted request re-enters at its place in that order. Neither vLLM nor SGLang has this policy
(SGLang's ``lpm`` orders by cached prefix); it is a what-if study of head-of-line blocking.
"""

from __future__ import annotations

import heapq

from simkv.config.policy import ShortestFirstConfig, VllmV1Config
from simkv.engine.queues import WaitingQueue
from simkv.engine.registry import register
from simkv.engine.schedulers.vllm_v1 import VllmV1Scheduler
from simkv.engine.sequence import Seq


class ShortestFirstQueue:
    """Waiting requests ordered by ``(num_tokens, arrival_s, req_id)`` (a heap).

    A request's key is taken when it is pushed; ``num_tokens`` does not change while it waits.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[int, float, int, Seq]] = []

    def push(self, seq: Seq) -> None:
        heapq.heappush(self._heap, (seq.num_tokens, seq.arrival_s, seq.req_id, seq))

    push_front = push  # a preempted request re-enters at its place

    def peek(self) -> Seq:
        return self._heap[0][3]

    def pop(self) -> Seq:
        return heapq.heappop(self._heap)[3]

    def __len__(self) -> int:
        return len(self._heap)


@register(ShortestFirstConfig)
class ShortestFirstScheduler(VllmV1Scheduler):
    """:class:`VllmV1Scheduler` admitting the shortest waiting request first."""

    @classmethod
    def waiting_queue(cls, cfg: VllmV1Config) -> WaitingQueue:
        return ShortestFirstQueue()
