"""Scheduler and preemption config models: one small model per policy, picked by ``kind``.

Each scheduler model states what its policy can run (:class:`SchedulerTraits`, a class
attribute ``traits``); config validation and the runner ask the traits, never the ``kind``
string. A new scheduler adds its model here (and to :data:`SchedulerConfig`), its class in
``simkv/engine/schedulers/`` and its tests (``docs/architecture.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import Field

from simkv.config.base import Frozen

VictimPolicy = Literal["newest", "oldest", "longest", "fewest_blocks", "lowest_priority"]
# the victim policies vLLM itself has; the others are simkv what-if policies
VICTIMS_OF_VLLM: tuple[VictimPolicy, ...] = ("newest", "lowest_priority")


@dataclass(frozen=True)
class SchedulerTraits:
    """What a scheduling policy can run.

    ``memory``: paged blocks (``PagedKV``) or contiguous reservations (``ContiguousKV``);
    ``prefix_caching``: runs with a prefix cache (and has it on by default, as vLLM 0.11);
    ``swap``: may preempt by swapping to CPU; ``multi_sequence``: runs requests with
    ``workload.sampling`` (n > 1, beams); ``priority_victim``: knows ``lowest_priority``;
    ``engine_defaults``: takes the engine settings a measured profile fills in (vLLM V1 keys);
    ``reuse``: the free-block reuse order of the vLLM version it follows, the default of
    ``kv_cache.reuse`` (``lifo``: vLLM 0.6.3's ``NaiveBlockAllocator`` frees a block with
    ``appendleft`` and allocates with ``popleft``; ``fifo``: vLLM 0.11's free block queue).
    """

    memory: Literal["paged", "contiguous"]
    prefix_caching: bool = False
    swap: bool = False
    multi_sequence: bool = False
    priority_victim: bool = False
    engine_defaults: bool = False
    reuse: Literal["fifo", "lifo"] = "fifo"


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

    traits: ClassVar[SchedulerTraits] = SchedulerTraits(
        "paged", prefix_caching=True, priority_victim=True, engine_defaults=True
    )
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


class ShortestFirstConfig(VllmV1Config):
    """vLLM V1's step rules with shortest-first admission: the waiting request with the
    fewest tokens to compute goes first (a what-if policy; neither vLLM nor SGLang has it).
    Long prompts can starve while short ones keep arriving."""

    traits: ClassVar[SchedulerTraits] = SchedulerTraits("paged", prefix_caching=True)
    kind: Literal["shortest_first"]  # type: ignore[assignment]
    policy: Literal["fcfs"] = Field(
        "fcfs", description="unused: the waiting order is by tokens to compute"
    )


class VllmV0Config(Frozen):
    """vLLM 0.6 default scheduler: prefill-only or decode-only steps, watermark admission."""

    traits: ClassVar[SchedulerTraits] = SchedulerTraits(
        "paged", swap=True, multi_sequence=True, reuse="lifo"
    )
    kind: Literal["vllm_v0"]
    max_num_seqs: int = Field(256, ge=1, description="max running requests")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="tokens per prefill step; None = max(max_model_len, 2048)"
    )
    watermark: float = Field(0.01, ge=0, lt=1, description="fraction of GPU blocks kept free")


class StaticConfig(Frozen):
    """Request-level batching: a batch runs until all its requests finish."""

    traits: ClassVar[SchedulerTraits] = SchedulerTraits("contiguous")
    kind: Literal["static"]
    max_batch_size: int = Field(256, ge=1, description="max requests per batch")


class OrcaConfig(Frozen):
    """Iteration-level batching over contiguous per-request reservations (Orca baselines)."""

    traits: ClassVar[SchedulerTraits] = SchedulerTraits("contiguous")
    kind: Literal["orca"]
    reservation: Literal["max", "pow2", "oracle"] = "max"
    max_batch_size: int = Field(256, ge=1, description="max running requests")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="token budget per step; None = unlimited"
    )


SchedulerConfig = Annotated[
    VllmV1Config | ShortestFirstConfig | VllmV0Config | StaticConfig | OrcaConfig,
    Field(discriminator="kind"),
]


def scheduler_models() -> dict[str, type[Frozen]]:
    """Every scheduler config model by its ``kind`` (read off :data:`SchedulerConfig`)."""
    union = get_args(SchedulerConfig)[0]
    return {get_args(m.model_fields["kind"].annotation)[0]: m for m in get_args(union)}


def traits_of(kind: object) -> SchedulerTraits | None:
    """The traits of the scheduler named ``kind`` (None for an unknown name: validation
    reports it)."""
    model = scheduler_models().get(kind) if isinstance(kind, str) else None
    return None if model is None else model.traits  # type: ignore[attr-defined]


def kinds_with(trait: str) -> str:
    """The scheduler kinds whose traits have ``trait`` set, for messages ("vllm_v1")."""
    return " or ".join(k for k, m in scheduler_models().items() if getattr(m.traits, trait))  # type: ignore[attr-defined]
