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

from operator import attrgetter

from simkv.config.policy import ShortestFirstConfig, VllmV1Config
from simkv.engine.queues import OrderedQueue, WaitingQueue
from simkv.engine.registry import register
from simkv.engine.schedulers.vllm_v1 import VllmV1Scheduler


@register(ShortestFirstConfig)
class ShortestFirstScheduler(VllmV1Scheduler):
    """:class:`VllmV1Scheduler` admitting the shortest waiting request first."""

    @classmethod
    def waiting_queue(cls, cfg: VllmV1Config) -> WaitingQueue:
        return OrderedQueue(attrgetter("num_tokens"))
