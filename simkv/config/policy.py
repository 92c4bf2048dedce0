"""Scheduler and preemption config models: one small model per policy, picked by ``kind``.

Each scheduler model states what its policy can run (:class:`SchedulerTraits`, a class
attribute ``traits``); config validation and the runner ask the traits, never the ``kind``
string. A new scheduler adds its model here (and to :data:`SchedulerConfig`), its class in
``simkv/engine/schedulers/`` and its tests (``docs/architecture.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import Field, field_validator

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
    ``null_block``: block 0 of the paged pool is reserved (vLLM V1's null block), so
    ``num_blocks - 1`` blocks are usable;
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
    null_block: bool = False
    reuse: Literal["fifo", "lifo"] = "fifo"


class PreemptionConfig(Frozen):
    """How a running request is preempted when the KV pool runs out."""

    mode: Literal["auto", "recompute", "swap"] = Field(
        "auto",
        description="auto = vLLM v0's rule: recompute single-sequence requests, swap "
        "multi-sequence ones; vllm_v1 only recomputes (as vLLM 0.11)",
    )
    victim: VictimPolicy | None = Field(
        None,
        description="None = vLLM's own choice: lowest_priority under a scheduler's "
        "policy: priority (vLLM 0.11 v1/core/sched/scheduler.py Scheduler.schedule picks by "
        "(priority, arrival)), newest (most recently admitted) otherwise; oldest / longest / "
        "fewest_blocks for what-if studies",
    )

    def victim_for(self, policy: str) -> VictimPolicy:
        """The victim policy in effect under the waiting-queue ``policy`` (``fcfs`` or
        ``priority``): the configured one, else vLLM's (see ``victim``)."""
        if self.victim is not None:
            return self.victim
        return "lowest_priority" if policy == "priority" else "newest"


class VllmV1Config(Frozen):
    """vLLM 0.11 (V1 engine) scheduler: one token budget for prefill chunks and decodes."""

    traits: ClassVar[SchedulerTraits] = SchedulerTraits(
        "paged", prefix_caching=True, priority_victim=True, engine_defaults=True, null_block=True
    )
    kind: Literal["vllm_v1"]
    default_budget: ClassVar[int] = 8192  # max_num_batched_tokens with chunked prefill
    default_max_seqs: ClassVar[int] = 256  # max_num_seqs cap when unset
    max_num_seqs: int | None = Field(
        None,
        ge=1,
        description="max running requests; None = min(256, max_num_batched_tokens) (vLLM "
        "0.11 engine/arg_utils.py EngineArgs._set_default_args, outside H100-class GPUs); "
        "filled in by the run config (SimConfig)",
    )
    max_num_batched_tokens: int | None = Field(
        None,
        ge=1,
        description="token budget per step; None = 8192 with chunked prefill, "
        "model.max_model_len without (vLLM 0.11 engine/arg_utils.py "
        "EngineArgs._set_default_args); filled in by the run config (SimConfig). Must be >= "
        "max_num_seqs, and >= model.max_model_len with chunked prefill off (vLLM 0.11 "
        "config/scheduler.py SchedulerConfig._verify_args refuses the rest)",
    )
    long_prefill_token_threshold: int = Field(
        0, ge=0, description="cap on one request's prefill chunk per step (0 = off)"
    )
    enable_chunked_prefill: bool = True
    policy: Literal["fcfs", "priority"] = "fcfs"
    vllm_version: Literal["0.11", "0.32"] = Field(
        "0.11",
        description="whose rules to follow where vLLM releases differ (vLLM's "
        "v1/core/sched/scheduler.py Scheduler.schedule and v1/core/block_pool.py): 0.11 = "
        "with chunked prefill off a waiting request whose next chunk exceeds the budget left "
        "is set aside and admission goes on; the long-prefill threshold always applies; "
        "freed blocks join the free queue's tail. 0.32 = admission stops at that request "
        "(vLLM PR #28911); the threshold applies only while more than one request runs or "
        "waits; freed blocks without cached content are reused first (kv_cache.reuse: split); "
        "reserve_full_prompt is on. Checked step by step against a real vLLM 0.32.0 "
        "(docs/conformance.md)",
    )
    reserve_full_prompt: bool | None = Field(
        None,
        description="admit a waiting request only when blocks for all its tokens are free "
        "(vLLM's scheduler_reserve_full_isl); False = vLLM 0.11, which admits when the first "
        "chunk fits. None = the release's default: off under 0.11, on under 0.32",
    )
    async_scheduling: bool = Field(
        False,
        description="vLLM's async scheduling (vLLM 0.32 turns it on where the platform "
        "supports it, config/vllm.py; its CPU platform turns it off): step n + 1 is "
        "scheduled while step n's output is outstanding, so a request that finishes in "
        "step n keeps its blocks and its running slot through step n + 1's scheduling "
        "(v1/core/sched/async_scheduler.py AsyncScheduler, v1/engine/core.py "
        "EngineCore.step_with_batch_queue). Scheduling only: the cost model prices steps as "
        "without it",
    )

    def reserves_full_prompt(self) -> bool:
        """:attr:`reserve_full_prompt`, or the default of :attr:`vllm_version` when unset."""
        if self.reserve_full_prompt is None:
            return self.vllm_version != "0.11"
        return self.reserve_full_prompt

    def whole_step_threshold(self) -> bool:
        """Whether the long-prefill threshold is off while at most one request runs or waits
        (vLLM 0.32 ``Scheduler.schedule``: nobody to starve)."""
        return self.vllm_version != "0.11"


def v1_budget(cfg: VllmV1Config, max_model_len: int) -> int:
    """The token budget per step of ``cfg``: its ``max_num_batched_tokens``, else vLLM 0.11's
    default (``engine/arg_utils.py`` ``EngineArgs._set_default_args``): ``max_model_len``
    with chunked prefill off, :attr:`VllmV1Config.default_budget` with it on."""
    if cfg.max_num_batched_tokens is not None:
        return cfg.max_num_batched_tokens
    return cfg.default_budget if cfg.enable_chunked_prefill else max_model_len


def v1_max_seqs(cfg: VllmV1Config, max_model_len: int) -> int:
    """The running-request cap of ``cfg``: its ``max_num_seqs``, else vLLM 0.11's default,
    ``min(256, budget)`` (``engine/arg_utils.py`` ``EngineArgs._set_default_args``)."""
    if cfg.max_num_seqs is not None:
        return cfg.max_num_seqs
    return min(cfg.default_max_seqs, v1_budget(cfg, max_model_len))


def v1_budget_problems(cfg: VllmV1Config, max_model_len: int) -> list[str]:
    """What vLLM 0.11 refuses at start-up (``config/scheduler.py``
    ``SchedulerConfig._verify_args``): a budget below ``max_model_len`` with chunked prefill
    off (no prompt longer than the budget could ever run), a budget below ``max_num_seqs``."""
    budget, seqs = v1_budget(cfg, max_model_len), v1_max_seqs(cfg, max_model_len)
    key = "scheduler.max_num_batched_tokens"
    if not cfg.enable_chunked_prefill and budget < max_model_len:
        return [
            f"{key} {budget} is below model.max_model_len {max_model_len} with chunked "
            "prefill off, which vLLM refuses at start-up (a longer prompt could never run); "
            f"raise it to {max_model_len} (or leave it unset: it then defaults to "
            "max_model_len), lower model.max_model_len or set "
            "scheduler.enable_chunked_prefill: true"
        ]
    if budget < seqs:
        return [
            f"{key} {budget} is below scheduler.max_num_seqs {seqs}, which vLLM refuses at "
            f"start-up; raise it to at least {seqs} or lower max_num_seqs"
        ]
    return []


class ShortestFirstConfig(VllmV1Config):
    """vLLM V1's step rules with shortest-first admission: the waiting request with the
    fewest tokens to compute goes first (a what-if policy; neither vLLM nor SGLang has it).
    Long prompts can starve while short ones keep arriving."""

    traits: ClassVar[SchedulerTraits] = SchedulerTraits(
        "paged", prefix_caching=True, null_block=True
    )
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
    vllm_version: Literal["0.4", "0.6"] | None = Field(
        None,
        description="the engine generation whose host costs cost_model.host_era: auto "
        "applies: 0.4 = vLLM 0.2-0.4 (2023-24), 0.6 = vLLM 0.6 "
        "(simkv.config.host_eras); the scheduling rules are vLLM 0.6.3's either way. None = "
        "no era named: the vLLM V1 host costs every config has used",
    )

    @field_validator("vllm_version", mode="before")
    @classmethod
    def _version_as_written(cls, value: object) -> object:
        """``vllm_version: 0.4`` written unquoted (a YAML float) means "0.4"."""
        return str(value) if isinstance(value, float) else value


def v0_budget(cfg: VllmV0Config, max_model_len: int) -> int:
    """The prefill token budget of ``cfg``: its ``max_num_batched_tokens``, else vLLM 0.6.3's
    default without chunked prefill, ``max(max_model_len, 2048)`` (``engine/arg_utils.py``)."""
    return cfg.max_num_batched_tokens or max(max_model_len, 2048)


def v0_budget_problems(cfg: VllmV0Config, max_model_len: int) -> list[str]:
    """What vLLM 0.6.3 refuses at start-up (``config.py`` ``SchedulerConfig._verify_args``;
    its default scheduler has no chunked prefill): a budget below ``max_model_len``, a budget
    below ``max_num_seqs``."""
    budget, key = v0_budget(cfg, max_model_len), "scheduler.max_num_batched_tokens"
    if budget < max_model_len:
        return [
            f"{key} {budget} is below model.max_model_len {max_model_len}, which vLLM 0.6 "
            "refuses at start-up (a longer prompt could never run); raise it to "
            f"{max_model_len} (or leave it unset: it then defaults to max(max_model_len, "
            "2048)) or lower model.max_model_len"
        ]
    if budget < cfg.max_num_seqs:
        return [
            f"{key} {budget} is below scheduler.max_num_seqs {cfg.max_num_seqs}, which vLLM "
            f"refuses at start-up; raise it to at least {cfg.max_num_seqs} or lower "
            "max_num_seqs"
        ]
    return []


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
