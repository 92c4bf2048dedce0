"""Scheduler and preemption config models: one small model per policy, picked by ``kind``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from simkv.config.base import Frozen

VictimPolicy = Literal["newest", "oldest", "longest", "fewest_blocks", "lowest_priority"]


class PreemptionConfig(Frozen):
    """How a running request is preempted when the KV pool runs out."""

    mode: Literal["auto", "recompute", "swap"] = Field(
        "auto",
        description="auto = vLLM v0's rule: recompute single-sequence requests, swap "
        "multi-sequence ones; vllm_v1 only recomputes (as vLLM 0.11)",
    )
    victim: VictimPolicy = Field(
        "newest",
        description="newest = most recently admitted (vLLM); lowest_priority = vLLM 0.11 "
        "priority policy; oldest / longest / fewest_blocks for what-if studies",
    )


class VllmV1Config(Frozen):
    """vLLM 0.11 (V1 engine) scheduler: one token budget for prefill chunks and decodes."""

    kind: Literal["vllm_v1"]
    max_num_seqs: int = Field(256, ge=1, description="max running requests")
    max_num_batched_tokens: int = Field(8192, ge=1, description="token budget per step")
    long_prefill_token_threshold: int = Field(
        0, ge=0, description="cap on one request's prefill chunk per step (0 = off)"
    )
    enable_chunked_prefill: bool = True
    policy: Literal["fcfs", "priority"] = "fcfs"
    reserve_full_prompt: bool = Field(
        False,
        description="admit a waiting request only when blocks for all its tokens are free "
        "(later vLLM's scheduler_reserve_full_isl, on in vLLM 0.19's runs); False = vLLM 0.11, "
        "which admits when the first chunk fits",
    )


class VllmV0Config(Frozen):
    """vLLM 0.6 default scheduler: prefill-only or decode-only steps, watermark admission."""

    kind: Literal["vllm_v0"]
    max_num_seqs: int = Field(256, ge=1, description="max running requests")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="tokens per prefill step; None = max(max_model_len, 2048)"
    )
    watermark: float = Field(0.01, ge=0, lt=1, description="fraction of GPU blocks kept free")


class StaticConfig(Frozen):
    """Request-level batching: a batch runs until all its requests finish."""

    kind: Literal["static"]
    max_batch_size: int = Field(256, ge=1, description="max requests per batch")


class OrcaConfig(Frozen):
    """Iteration-level batching over contiguous per-request reservations (Orca baselines)."""

    kind: Literal["orca"]
    reservation: Literal["max", "pow2", "oracle"] = "max"
    max_batch_size: int = Field(256, ge=1, description="max running requests")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="token budget per step; None = unlimited"
    )


SchedulerConfig = Annotated[
    VllmV1Config | VllmV0Config | StaticConfig | OrcaConfig, Field(discriminator="kind")
]
