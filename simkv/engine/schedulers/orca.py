"""Orca-style iteration-level batching over contiguous reservations (the PagedAttention paper's
Orca (Max) / (Pow2) / (Oracle) baselines).

Every step, each running request computes its next token and waiting requests are admitted FCFS
(whole prompt in the same step, as Orca's selective batching allows) while fewer than
``max_batch_size`` run, the optional token budget holds, and the buddy allocator can place the
request's reservation. A reservation covers the whole request, so nothing is ever preempted; a
request whose reservation cannot fit even an empty pool is rejected.
"""

from __future__ import annotations

import numpy as np

from simkv.config.policy import OrcaConfig
from simkv.config.sim import SimConfig
from simkv.engine.capacity import KVSizing
from simkv.engine.memory.contiguous import ContiguousKV
from simkv.engine.registry import contiguous_memory, register
from simkv.engine.request.plan import StepPlan
from simkv.engine.schedulers.contiguous import ContiguousSchedulerBase
from simkv.metrics.recorder import Recorder


@register(OrcaConfig)
class OrcaScheduler(ContiguousSchedulerBase):
    """Iteration-level batching; memory reserved per request by the configured policy."""

    def __init__(self, cfg: OrcaConfig, kv: ContiguousKV, recorder: Recorder) -> None:
        super().__init__(kv, recorder)
        self.cfg = cfg

    @classmethod
    def build(
        cls, cfg: SimConfig, sizing: KVSizing, recorder: Recorder, rng: np.random.Generator
    ) -> OrcaScheduler:
        sched: OrcaConfig = cfg.scheduler  # type: ignore[assignment]
        return cls(sched, contiguous_memory(cfg, sizing, sched.reservation), recorder)

    def schedule(self, now: float) -> StepPlan:
        plan = StepPlan()
        for seq in self.running:
            plan.add(seq, seq.num_tokens - seq.num_computed)
        budget = self.cfg.max_num_batched_tokens
        waiting = self.waiting
        while len(waiting) and len(self.running) < self.cfg.max_batch_size:
            seq = waiting.peek()
            if budget is not None and plan.num_tokens + seq.num_tokens > budget:
                break
            if not self.kv.can_reserve(seq):
                break
            plan.add(self._admit_head(now), seq.num_tokens)
        self._set_demand()
        return plan
