"""Request-level (static) batching, FasterTransformer-style.

When the engine is idle, a batch is formed FCFS from up to ``max_batch_size`` waiting requests
whose maximum-length reservations (``max_model_len`` slots each, contiguous) fit in memory. The
batch runs to completion: one prefill step for all prompts, padded to the longest prompt, then
decode steps over the whole batch (finished requests stay in it as padding) until its longest
request ends. Results return when the batch ends: every request's ``finish_s`` is the batch's end;
``first_token_s`` is when its first token was computed.
"""

from __future__ import annotations

import numpy as np

from simkv.config.policy import StaticConfig
from simkv.config.sim import SimConfig
from simkv.engine.capacity import KVSizing
from simkv.engine.memory.contiguous import ContiguousKV
from simkv.engine.registry import contiguous_memory, register
from simkv.engine.request.plan import StepPlan
from simkv.engine.request.seq import Seq, Status
from simkv.engine.schedulers.contiguous import ContiguousSchedulerBase
from simkv.metrics.recorder import Recorder


@register(StaticConfig)
class StaticScheduler(ContiguousSchedulerBase):
    """One batch at a time, memory reserved for the maximum length."""

    finishes_at_last_token = False  # the whole batch leaves with its last request

    def __init__(self, cfg: StaticConfig, kv: ContiguousKV, recorder: Recorder) -> None:
        super().__init__(kv, recorder)
        self.cfg = cfg
        self._done: list[Seq] = []  # batch members whose output is complete

    @classmethod
    def build(
        cls, cfg: SimConfig, sizing: KVSizing, recorder: Recorder, rng: np.random.Generator
    ) -> StaticScheduler:
        """Every request reserves ``max_model_len`` slots (FasterTransformer's static batch)."""
        return cls(cfg.scheduler, contiguous_memory(cfg, sizing, "max"), recorder)  # type: ignore[arg-type]

    def schedule(self, now: float) -> StepPlan:
        plan = StepPlan()
        if not self.running:
            self._form_batch(now)
            longest = max((s.num_tokens for s in self.running), default=0)
            for seq in self.running:
                plan.add(seq, seq.num_tokens)
            plan.prefill_tokens += longest * len(self.running) - plan.prefill_tokens
        else:
            for seq in self.running:
                if seq.num_output < seq.output_tokens:
                    plan.add(seq, 1)
            plan.decode_tokens += len(self.running) - len(plan.seqs)  # padding rows
        self._set_demand()
        return plan

    def _form_batch(self, now: float) -> None:
        waiting = self.waiting
        while len(waiting) and len(self.running) < self.cfg.max_batch_size:
            seq = waiting.peek()
            if not self.kv.can_reserve(seq):
                break
            self._admit_head(now)

    def _on_output_complete(self, seq: Seq, now: float) -> None:
        self._done.append(seq)
        if len(self._done) == len(self.running):
            for member in self._done:
                self._finish(member, now)
            self._done = []
        else:
            seq.status = Status.RUNNING
