"""The ``fleet:`` section of a run config: replica groups behind one router.

A config without ``fleet:`` is one replica, as before. With it, the run serves its workload
from ``Σ count`` replicas in one event loop; each replica group may replace any engine section
of the top level (``model``, ``gpu``, ``parallel``, ``kv_cache``, ``scheduler``,
``preemption``, ``cost_model``) and inherits the others whole, so heterogeneous fleets (say
4 × H100 TP1 + 2 × A100 TP2) are one list. ``workload``, ``seed`` and ``slo`` belong to the
fleet. A router of each ``kind`` is one class in :mod:`simkv.engine.routers`; every default
lives here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from simkv.config.base import Frozen
from simkv.config.cost import CostConfig
from simkv.config.disagg import AlwaysRemote, DeciderConfig, Role
from simkv.config.hardware import GpuSpec, ModelSpec
from simkv.config.links import LinkConfig
from simkv.config.policy import PreemptionConfig, SchedulerConfig
from simkv.config.sections import KVCacheConfig, ParallelConfig
from simkv.config.tiers import TierConfig

MAX_REPLICAS = 4096
"""Most replicas of one fleet: each holds its own KV block tables (up to 2^26 blocks)."""
MAX_STALENESS_MS = 3.6e6
"""Longest refresh interval of the routers' view of the replicas (one hour)."""

ENGINE_SECTIONS = (
    "model", "gpu", "parallel", "kv_cache", "scheduler", "preemption", "cost_model",
)  # fmt: skip
"""The top-level sections a replica group may replace."""


class RoundRobinRouter(Frozen):
    """Replicas in turn, in config order (replica 0, 1, …, 0, …)."""

    kind: Literal["round_robin"]


class RandomRouter(Frozen):
    """A uniformly random replica, drawn from the run's own generator (seeded by ``seed``)."""

    kind: Literal["random"]


class LeastOutstandingRouter(Frozen):
    """The replica with the fewest outstanding requests (routed, not yet finished); ties go
    to the lowest index."""

    kind: Literal["least_outstanding"]


class LeastKVUsageRouter(Frozen):
    """The replica whose KV pool is least used (blocks used / blocks); ties: fewest
    outstanding requests, then the lowest index."""

    kind: Literal["least_kv_usage"]


class ShortestQueueTokensRouter(Frozen):
    """Join the shortest queue by work: the replica with the fewest outstanding tokens
    (prompt + output tokens of its routed, unfinished requests); ties: lowest index."""

    kind: Literal["shortest_queue_tokens"]


class TierHitWeights(Frozen):
    """What a cached prompt token is worth to a prefix-aware router by where it lives: HBM,
    or a KV tier it must be loaded from first (:mod:`simkv.config.tiers`), as Dynamo's router
    credits host and disk hits with their own weights and llm-d's KV-cache manager scores a
    CPU-resident block 0.8 of a GPU one. The disk and remote defaults are simkv's ordering
    (each slower to load than the tier above), not a measurement: sweep them."""

    hbm: float = Field(1.0, ge=0, le=1, description="an HBM hit (needs no load)")
    cpu: float = Field(0.8, ge=0, le=1, description="a CPU-tier hit (llm-d: 0.8)")
    disk: float = Field(0.5, ge=0, le=1, description="a disk-tier hit (simkv's choice)")
    remote: float = Field(0.3, ge=0, le=1, description="a remote-tier hit (simkv's choice)")


class PrefixAwareRouter(Frozen):
    """SGLang router's cache-aware policy (sgl-router ``CacheAwarePolicy``, defaults of its
    ``launch_router.py``): when the load is imbalanced — outstanding requests
    ``max − min > balance_abs_threshold`` and ``max > balance_rel_threshold × min`` — the least
    loaded replica; otherwise the replica with the longest cached prefix if it covers more than
    ``cache_threshold`` of the prompt, else the replica with the least-used KV pool (SGLang: the
    smallest tree)."""

    kind: Literal["prefix_aware"]
    cache_threshold: float = Field(
        0.5, ge=0, le=1, description="share of the prompt a hit must cover (SGLang: 0.5)"
    )
    balance_abs_threshold: int = Field(
        32, ge=0, description="outstanding-request gap that counts as imbalance (SGLang: 32)"
    )
    balance_rel_threshold: float = Field(
        1.0001, ge=1, le=1e6, description="max/min outstanding ratio of imbalance (SGLang)"
    )
    tier_weights: TierHitWeights | None = Field(
        None,
        description="score a replica's cached prefix by where it lives (HBM, then each KV "
        "tier, each token times its weight); None: HBM hits only",
    )


class SessionAffinityRouter(Frozen):
    """Every turn of a multi-turn session on the replica its first turn went to (the KV of
    the conversation stays where it was computed); first turns and requests without a session
    by ``first``."""

    kind: Literal["session_affinity"]
    first: Literal["round_robin", "least_outstanding", "least_kv_usage"] = Field(
        "least_outstanding", description="rule for a session's first turn"
    )


class ScorerWeights(Frozen):
    """Weights of the weighted router's scorers (each scorer maps a replica to [0, 1], 1 best,
    as llm-d's inference scheduler scorers do)."""

    queue: float = Field(1.0, ge=0, le=1e6, description="1 − outstanding/max outstanding")
    kv_usage: float = Field(1.0, ge=0, le=1e6, description="1 − KV usage")
    prefix: float = Field(1.0, ge=0, le=1e6, description="cached prefix / prompt tokens")
    queue_tokens: float = Field(0.0, ge=0, le=1e6, description="1 − tokens/max tokens")


class WeightedRouter(Frozen):
    """llm-d's inference scheduler (the gateway API inference extension's scheduling
    framework: weighted scorers, then a max-score picker): score every replica as
    ``Σ weight × scorer`` and take the highest; ties go to the lowest index (llm-d picks among
    ties at random)."""

    kind: Literal["weighted"]
    weights: ScorerWeights = ScorerWeights()
    tier_weights: TierHitWeights | None = Field(
        None, description="the prefix scorer's tokens weighted by where they live (as "
        "prefix_aware's); None: HBM hits only",
    )  # fmt: skip


RouterConfig = Annotated[
    RoundRobinRouter | RandomRouter | LeastOutstandingRouter | LeastKVUsageRouter
    | ShortestQueueTokensRouter | PrefixAwareRouter | SessionAffinityRouter | WeightedRouter,
    Field(discriminator="kind"),
]  # fmt: skip


class ReplicaGroup(Frozen):
    """``count`` identical replicas; each engine section given here replaces the top-level
    one whole (unset: the top-level section)."""

    name: str | None = Field(None, max_length=40, description="label in reports; unset: g<k>")
    count: int = Field(1, ge=1, le=MAX_REPLICAS, description="replicas in this group")
    role: Role = Field("mixed", description="mixed (both phases), prefill or decode")
    model: ModelSpec | None = None
    gpu: GpuSpec | None = None
    parallel: ParallelConfig | None = None
    kv_cache: KVCacheConfig | None = None
    scheduler: SchedulerConfig | None = None
    preemption: PreemptionConfig | None = None
    cost_model: CostConfig | None = None


class DisaggregationConfig(Frozen):
    """Prefill/decode disaggregation (:mod:`simkv.config.disagg`, :mod:`simkv.engine.disagg`):
    the link KV crosses, which prompts a decode replica sends away, and the router that picks
    their prefill replica."""

    link: LinkConfig = Field(description="the link KV crosses from prefill to decode replicas")
    decider: DeciderConfig = Field(
        AlwaysRemote(kind="always"), description="which prompts a decode replica sends away"
    )
    prefill_router: RouterConfig = Field(
        LeastOutstandingRouter(kind="least_outstanding"),
        description="picks a prompt's prefill replica among the prefill replicas",
    )
    return_kv: bool = Field(
        False,
        description="send a finished request's KV back to its prefill replica's prefix cache "
        "(the blocks it lacks), so a session's next turn prefilled there hits it; off: vLLM's "
        "NixlConnector and Dynamo move KV one way (simkv.engine.kv_return)",
    )


class FleetConfig(Frozen):
    """Replica groups behind one router, in one event loop (:mod:`simkv.engine.fleet`)."""

    router: RouterConfig = RoundRobinRouter(kind="round_robin")
    staleness_ms: float = Field(
        0.0,
        ge=0,
        le=MAX_STALENESS_MS,
        description="the routers' view of the replicas is refreshed every staleness_ms "
        "(0: live), as a real router polls its replicas' metrics",
    )
    replicas: list[ReplicaGroup] = Field(
        min_length=1, max_length=MAX_REPLICAS, description="replica groups, in order"
    )
    disaggregation: DisaggregationConfig | None = Field(
        None, description="prefill/decode disaggregation; needs prefill and decode groups"
    )
    remote_tier: TierConfig | None = Field(
        None,
        description="a KV tier every replica shares (kind: remote), below each replica's own "
        "kv_cache.tiers (simkv.config.tiers)",
    )

    @field_validator("remote_tier")
    @classmethod
    def _remote_kind(cls, tier: TierConfig | None) -> TierConfig | None:
        if tier is not None and tier.kind != "remote":
            raise ValueError(f"fleet.remote_tier is the shared tier: kind remote, not {tier.kind}")
        if tier is not None and tier.stored_blocks == "prompt":
            raise ValueError("stored_blocks: prompt is set on a replica's first tier "
                             "(kv_cache.tiers), not on the shared one")  # fmt: skip
        return tier

    @property
    def disaggregated(self) -> bool:
        """Whether some groups prefill for others (``role`` prefill and decode)."""
        return any(group.role != "mixed" for group in self.replicas)

    @property
    def num_replicas(self) -> int:
        """Replicas of all groups."""
        return sum(group.count for group in self.replicas)
