"""KV offload tiers below HBM: where a replica's prefix cache spills (CPU memory, a local disk)
and a store shared by a fleet (``remote``), named by medium preset.

A replica's tiers are ``kv_cache.tiers`` (``cpu`` then ``disk``, each at most once); a fleet's
shared tier is ``fleet.remote_tier`` (``kind: remote``), below every replica's own tiers. Each
tier holds whole blocks of the replica's block size under their content keys, up to its
capacity (``capacity_gib`` or ``capacity_blocks``; a ``cpu`` or ``disk`` tier's per replica, a
``remote`` tier's in all), and moves them at its medium's read and write bandwidth after its
latency, concurrent transfers sharing it (:mod:`simkv.engine.tiers`).

Bandwidth: ``medium`` names a preset (:data:`TIER_MEDIA`: GB/s = 10^9 B/s each way, µs, and a
source; a number no spec sheet gives is marked an estimate); ``read_gb_per_s``,
``write_gb_per_s`` and ``latency_us`` replace its numbers. A ``cpu`` tier without a medium
moves blocks over the GPU's own host link (``gpu.host_link_gbps``, the link vLLM's swap space
uses). A ``cpu`` tier's bandwidth is one GPU's and a replica of tensor-parallel degree t moves
t times it (each GPU copies its shard over its own PCIe link); a ``disk`` or ``remote`` tier's
is the device's or the store's, whatever the replica's size.

When blocks enter a tier (``store``): ``write_through``, every full block as the tier above it
gets it (from HBM: after the step that computed it, as vLLM's ``OffloadingConnector`` stores;
SGLang HiCache's ``write_through`` policy), or ``on_evict``, a block as the tier above evicts
it (for the first tier, when HBM's prefix cache evicts it: HiCache's ``write_back``).
Eviction within a tier (``eviction``): ``lru``, ``arc`` or ``frequency``
(:mod:`simkv.kv.tier_policies`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, NamedTuple

from pydantic import Field, field_validator, model_validator

from simkv.config.base import Frozen
from simkv.config.limits import MAX_BLOCKS, Gbps, LatencyUs

__all__ = ["TIER_MEDIA", "TierConfig", "TierMedium", "check_tier_list"]

TierKind = Literal["cpu", "disk", "remote"]


class TierMedium(NamedTuple):
    """One medium: read and write GB/s, latency in µs, the tier kind it serves, its display
    name, and where the numbers come from."""

    read_gb_per_s: float
    write_gb_per_s: float
    latency_us: float
    kind: TierKind
    name: str
    source: str


_PCIE_LATENCY = "10 µs latency is an estimate (a cudaMemcpyAsync launch plus DMA start)"
_NVME_LATENCY = (
    "80 µs latency is an estimate (4 KiB random-read latency at queue depth 1 of current "
    "NVMe drives is 40-100 µs)"
)
_NET_LATENCY = "latency is an estimate (one RDMA or TCP round trip plus the store's lookup)"

TIER_MEDIA: Mapping[str, TierMedium] = MappingProxyType(
    {
        "pcie4": TierMedium(
            31.5, 31.5, 10.0, "cpu", "PCIe 4.0 x16 to host memory",
            f"PCI-SIG PCIe 4.0: 16 GT/s x 16 lanes, 128b/130b coding, per GPU; {_PCIE_LATENCY}",
        ),
        "pcie5": TierMedium(
            63.0, 63.0, 10.0, "cpu", "PCIe 5.0 x16 to host memory",
            f"PCI-SIG PCIe 5.0: 32 GT/s x 16 lanes, 128b/130b coding, per GPU; {_PCIE_LATENCY}",
        ),
        "sata_ssd": TierMedium(
            0.56, 0.53, 100.0, "disk", "SATA SSD",
            "Samsung 870 EVO data sheet: 560 MB/s sequential read, 530 MB/s write; 100 µs "
            "latency is an estimate",
        ),
        "nvme_gen3": TierMedium(
            3.5, 3.3, 80.0, "disk", "NVMe PCIe 3.0 x4 SSD",
            f"Samsung 970 EVO Plus data sheet: 3,500 MB/s read, 3,300 MB/s write; {_NVME_LATENCY}",
        ),
        "nvme_gen4": TierMedium(
            7.45, 6.9, 80.0, "disk", "NVMe PCIe 4.0 x4 SSD",
            f"Samsung 990 PRO data sheet: 7,450 MB/s read, 6,900 MB/s write; {_NVME_LATENCY}",
        ),
        "nvme_gen5": TierMedium(
            14.5, 12.7, 80.0, "disk", "NVMe PCIe 5.0 x4 SSD",
            f"Crucial T705 data sheet: 14,500 MB/s read, 12,700 MB/s write; {_NVME_LATENCY}",
        ),
        "rdma_200g": TierMedium(
            25.0, 25.0, 20.0, "remote", "store over 200 Gb/s RDMA",
            f"200 Gb/s line rate (InfiniBand HDR or RoCE); 20 µs {_NET_LATENCY}",
        ),
        "rdma_400g": TierMedium(
            50.0, 50.0, 20.0, "remote", "store over 400 Gb/s RDMA",
            f"400 Gb/s line rate (InfiniBand NDR or RoCE); 20 µs {_NET_LATENCY}",
        ),
        "tcp_100g": TierMedium(
            12.5, 12.5, 100.0, "remote", "store over 100 GbE TCP",
            f"100 Gb/s Ethernet line rate (an estimate for TCP); 100 µs {_NET_LATENCY}",
        ),
    }
)  # fmt: skip
"""Every medium by name; N Gb/s line rate is N / 8 GB/s."""


class TierConfig(Frozen):
    """One offload tier (the module docstring). Invariants: exactly one capacity; ``medium``,
    when given, names a preset of :data:`TIER_MEDIA` for this ``kind``; a ``disk`` or
    ``remote`` tier names a medium or both bandwidths."""

    kind: TierKind
    capacity_gib: float | None = Field(
        None, gt=0, le=1 << 20, description="GiB of KV the tier holds (cpu, disk: per replica)"
    )
    capacity_blocks: int | None = Field(
        None, ge=1, le=MAX_BLOCKS, description="blocks the tier holds, given directly"
    )
    medium: str | None = Field(
        None,
        description="a preset of simkv.config.tiers.TIER_MEDIA (pcie4, pcie5, sata_ssd, "
        "nvme_gen3/4/5, rdma_200g, rdma_400g, tcp_100g); unset for cpu: the GPU's host link",
    )
    read_gb_per_s: Gbps | None = Field(None, description="GB/s out of the tier (loads)")
    write_gb_per_s: Gbps | None = Field(None, description="GB/s into the tier (stores)")
    latency_us: LatencyUs | None = Field(None, description="µs before a transfer's bytes move")
    eviction: Literal["lru", "arc", "frequency"] = Field(
        "lru",
        description="which block leaves a full tier: lru (vLLM's LRUOffloadingManager), arc "
        "(vLLM's ARCOffloadingManager), frequency (a count doubled on a hit and halved as "
        "the engine steps, as NVIDIA Dynamo's frequency policy)",
    )
    store: Literal["write_through", "on_evict"] = Field(
        "write_through",
        description="when blocks enter: write_through = as the tier above gets them (HBM: "
        "after the step that computed them, vLLM's OffloadingConnector); on_evict = as the "
        "tier above evicts them (SGLang HiCache's write_back)",
    )

    stored_blocks: Literal["prompt_and_output", "prompt"] = Field(
        "prompt_and_output",
        description="which computed blocks a write_through first tier stores: "
        "prompt_and_output (vLLM's OffloadingConnector stores every full block it computes, "
        "_get_reqs_to_store) or prompt (LMCache's default, save_decode_cache: false); set on a "
        "replica's first tier (kv_cache.tiers) only",
    )

    @model_validator(mode="after")
    def _one_capacity(self) -> TierConfig:
        if self.stored_blocks == "prompt" and self.store != "write_through":
            raise ValueError("stored_blocks: prompt needs store: write_through (a tier storing on "
                             "eviction takes whatever the tier above evicts)")  # fmt: skip
        if (self.capacity_gib is None) == (self.capacity_blocks is None):
            raise ValueError(f"a {self.kind} tier needs capacity_gib or capacity_blocks, one")
        if self.medium is not None and TIER_MEDIA[self.medium].kind != self.kind:
            other = TIER_MEDIA[self.medium].kind
            raise ValueError(f"medium {self.medium!r} is a {other} medium, not {self.kind}")
        needs_medium = self.kind != "cpu" and self.medium is None
        if needs_medium and (self.read_gb_per_s is None or self.write_gb_per_s is None):
            media = ", ".join(n for n, m in TIER_MEDIA.items() if m.kind == self.kind)
            raise ValueError(
                f"a {self.kind} tier needs a medium ({media}) or read_gb_per_s and write_gb_per_s"
            )
        return self

    @field_validator("medium")
    @classmethod
    def _known_medium(cls, medium: str | None) -> str | None:
        if medium is not None and medium not in TIER_MEDIA:
            raise ValueError(f"unknown medium {medium!r}; known: {', '.join(TIER_MEDIA)}")
        return medium

    def bandwidths(self, host_link_gb_per_s: float, tensor_parallel: int) -> tuple[float, float]:
        """(read, write) bytes/s of this tier for one replica (a cpu tier's times the GPUs)."""
        preset = TIER_MEDIA[self.medium] if self.medium is not None else None
        read = self.read_gb_per_s or (preset.read_gb_per_s if preset else host_link_gb_per_s)
        write = self.write_gb_per_s or (preset.write_gb_per_s if preset else host_link_gb_per_s)
        scale = tensor_parallel if self.kind == "cpu" else 1
        return read * 1e9 * scale, write * 1e9 * scale

    @property
    def latency_s(self) -> float:
        """Seconds before a transfer's bytes move (the medium's, else 10 µs for cpu)."""
        if self.latency_us is not None:
            return self.latency_us * 1e-6
        preset = TIER_MEDIA[self.medium] if self.medium is not None else TIER_MEDIA["pcie4"]
        return preset.latency_us * 1e-6

    def blocks(self, block_bytes: int) -> int:
        """The tier's capacity in blocks of ``block_bytes`` bytes."""
        if self.capacity_blocks is not None:
            return self.capacity_blocks
        return int((self.capacity_gib or 0.0) * (1 << 30) // block_bytes)


def check_tier_list(tiers: list[TierConfig]) -> list[TierConfig]:
    """A replica's tier list: cpu before disk, each at most once, no remote tier (a remote
    tier is the fleet's: ``fleet.remote_tier``)."""
    kinds = [tier.kind for tier in tiers]
    if "remote" in kinds:
        raise ValueError("a remote tier is shared by a fleet: give it as fleet.remote_tier")
    if len(set(kinds)) != len(kinds) or kinds not in (["cpu"], ["disk"], ["cpu", "disk"], []):
        raise ValueError(f"tiers go cpu, then disk, each at most once (got {kinds})")
    if any(tier.stored_blocks == "prompt" for tier in tiers[1:]):
        raise ValueError("stored_blocks: prompt is set on the first tier only (a lower tier gets "
                         "what the first one holds)")  # fmt: skip
    return tiers
