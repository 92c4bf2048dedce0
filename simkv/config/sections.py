"""The small sections of a run config: model parallelism, the paged KV cache and the SLOs.

Each is a frozen model validated as part of :class:`simkv.config.sim.SimConfig`; every default
lives here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from simkv.config.base import Frozen
from simkv.config.limits import MAX_BLOCKS, MAX_GPU_GIB, MAX_SWAP_GIB, MAX_TP, Tokens
from simkv.config.tiers import TierConfig, check_tier_list

GIB = 1 << 30


class ParallelConfig(Frozen):
    """Model parallelism."""

    tensor_parallel: int = Field(
        1,
        ge=1,
        le=MAX_TP,
        description="GPUs per model replica (TP degree); as vLLM, it divides the model's "
        "attention heads, and its KV heads divide it or it divides them",
    )


class KVCacheConfig(Frozen):
    """The paged KV cache. Capacity: ``num_blocks`` or ``capacity_gib`` if given, else derived
    as GPU memory × utilization − weights − activation reserve (per GPU)."""

    block_size: Tokens = Field(16, description="tokens per block (vLLM default 16)")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="vLLM default 0.9")
    activation_reserve_gib: float = Field(
        1.0,
        ge=0,
        le=MAX_GPU_GIB,
        description="per-GPU activation/workspace memory kept out of the KV pool, GiB",
    )
    num_blocks: int | None = Field(
        None, ge=1, le=MAX_BLOCKS, description="GPU blocks, given directly (≤ 2^26)"
    )
    capacity_gib: float | None = Field(
        None, gt=0, le=MAX_GPU_GIB, description="KV GiB per GPU, given directly (≤ 1024)"
    )
    swap_space_gib: float = Field(
        4.0, ge=0, le=MAX_SWAP_GIB, description="CPU swap space per GPU, GiB (vLLM v0: 4)"
    )
    reuse: str | None = Field(
        None,
        pattern="^(fifo|lifo|split)$",
        description="freed-block reuse order: fifo = a freed block is reused last (vLLM 0.11's "
        "FreeKVCacheBlockQueue), lifo = reused first (vLLM 0.6.3's NaiveBlockAllocator: freed "
        "with appendleft, allocated with popleft), split = a freed block without cached "
        "content is reused first, a cached one last (vLLM 0.32's BlockPool.free_blocks). "
        "Unset: lifo under vllm_v0, split under vllm_v1 with vllm_version 0.32, fifo otherwise",
    )
    prefix_caching: Literal["none", "hash", "radix"] | None = Field(
        None,
        description="none; hash = vLLM 0.11 automatic prefix caching; radix = SGLang-style "
        "radix cache at block granularity. Unset: hash under vllm_v1 (vLLM 0.11's default), "
        "none otherwise",
    )
    tiers: list[TierConfig] = Field(
        default_factory=list,
        max_length=2,
        description="offload tiers below HBM that the prefix cache spills to, in order: cpu, "
        "then disk (simkv.config.tiers; needs prefix caching)",
    )

    @field_validator("tiers")
    @classmethod
    def _tier_order(cls, tiers: list[TierConfig]) -> list[TierConfig]:
        return check_tier_list(tiers)

    @model_validator(mode="after")
    def _one_capacity(self) -> KVCacheConfig:
        if self.num_blocks is not None and self.capacity_gib is not None:
            raise ValueError("give num_blocks or capacity_gib, not both")
        return self


class SLOConfig(Frozen):
    """Service-level objectives for ``request_goodput`` (a request is good if it meets all) and
    the run's verdict (each objective passes when its ``percentile`` is within it)."""

    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    e2el_ms: float | None = Field(None, gt=0)
    percentile: float = Field(
        99.0,
        ge=50,
        le=100,
        description="the latency percentile each objective is judged at: a run passes an "
        "objective when this percentile of the latency is within it (99: the p99 that vLLM's "
        "goodput studies and simkv's reports judge), 50..100",
    )
