"""Links that KV crosses between replicas (prefill/decode disaggregation), named by preset.

A field typed :class:`LinkConfig` takes a preset name (``link: ib_ndr``) or a mapping with
overrides (``link: {kind: ib_ndr, gb_per_s: 40}``). Every preset is one GPU's share of the link,
one direction: ``gb_per_s`` in GB/s (10^9 B/s), ``latency_us`` in µs, and a ``source`` saying
where each number comes from; a number no spec sheet or measurement gives is marked an estimate.

``mode`` says when KV may leave the prefill replica (:mod:`simkv.engine.transfer` shares the
bandwidth among concurrent transfers either way):

* ``store_and_forward`` (default, vLLM's ``NixlConnector``): the decode replica gets the request
  when its prefill has ended; once it reserved blocks the whole KV crosses, ``latency + bytes /
  bandwidth``;
* ``layerwise`` (Mooncake, SGLang's P/D mode, LMCache's layer-wise pipelining): the decode
  replica gets the request at routing time and reserves first; the prefill pushes each layer's
  KV as soon as it is computed (transfer of layer l overlaps the compute of layer l + 1), so a
  hand-over ends ``max(prefill end + one layer's bytes / bandwidth, reservation + bytes /
  bandwidth) + latency`` when alone on its NICs (:mod:`simkv.engine.layerwise`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from pydantic import field_validator, model_validator

from simkv.config.base import Frozen
from simkv.config.limits import Gbps, LatencyUs

__all__ = ["LINK_PRESETS", "LinkConfig", "LinkPreset"]


class LinkPreset(NamedTuple):
    """One link kind: GB/s per GPU each way, latency in µs, display name, source of the numbers."""

    gb_per_s: float
    latency_us: float
    name: str
    source: str


_NVLINK_LATENCY = "2 µs latency is an estimate (one NVSwitch hop plus copy-engine start)"
_PCIE_LATENCY = (
    "4.1 µs latency is an estimate (small-message host-to-host latency reported across "
    "PCIe-attached adapters, not one PCIe hop)"
)
_IB_LATENCY = (
    "0.6 µs latency: NVIDIA Quantum switch specs give sub-µs port-to-port latency; 0.6 µs "
    "with the adapters is an estimate"
)
_ROCE_LATENCY = "0.8 µs latency is an estimate (one switch hop plus RDMA NICs)"
_ETH_LATENCY = "20 µs latency is an estimate (kernel TCP stack, one switch hop)"

LINK_PRESETS: Mapping[str, LinkPreset] = MappingProxyType(
    {
        "nvlink3": LinkPreset(
            300.0, 2.0, "NVLink 3",
            f"NVIDIA A100 datasheet: 600 GB/s NVLink per GPU, both ways; {_NVLINK_LATENCY}",
        ),
        "nvlink4": LinkPreset(
            450.0, 2.0, "NVLink 4",
            f"NVIDIA H100 SXM datasheet: 900 GB/s NVLink per GPU, both ways; {_NVLINK_LATENCY}",
        ),
        "nvlink5": LinkPreset(
            900.0, 2.0, "NVLink 5",
            f"NVIDIA B200 datasheet: 1.8 TB/s NVLink per GPU, both ways; {_NVLINK_LATENCY}",
        ),
        "pcie4": LinkPreset(
            31.5, 4.1, "PCIe 4.0 x16",
            f"PCI-SIG PCIe 4.0: 16 GT/s x 16 lanes, 128b/130b coding; {_PCIE_LATENCY}",
        ),
        "pcie5": LinkPreset(
            63.0, 4.1, "PCIe 5.0 x16",
            f"PCI-SIG PCIe 5.0: 32 GT/s x 16 lanes, 128b/130b coding; {_PCIE_LATENCY}",
        ),
        "pcie6": LinkPreset(
            118.0, 4.1, "PCIe 6.0 x16",
            "PCI-SIG PCIe 6.0: 64 GT/s PAM4 x 16 lanes = 128 GB/s raw, of which 236 of each "
            f"256-byte flit carry data; {_PCIE_LATENCY}",
        ),
        "ib_hdr": LinkPreset(
            25.0, 0.6, "InfiniBand HDR",
            f"InfiniBand HDR 200 Gb/s, one port per GPU; {_IB_LATENCY}",
        ),
        "ib_ndr": LinkPreset(
            50.0, 0.6, "InfiniBand NDR",
            f"InfiniBand NDR 400 Gb/s, one port per GPU; {_IB_LATENCY}",
        ),
        "ib_xdr": LinkPreset(
            100.0, 0.6, "InfiniBand XDR",
            f"InfiniBand XDR 800 Gb/s, one port per GPU; {_IB_LATENCY}",
        ),
        "roce_100g": LinkPreset(
            12.5, 0.8, "RoCE 100 GbE", f"RoCE v2 at 100 Gb/s line rate; {_ROCE_LATENCY}"
        ),
        "roce_200g": LinkPreset(
            25.0, 0.8, "RoCE 200 GbE", f"RoCE v2 at 200 Gb/s line rate; {_ROCE_LATENCY}"
        ),
        "roce_400g": LinkPreset(
            50.0, 0.8, "RoCE 400 GbE", f"RoCE v2 at 400 Gb/s line rate; {_ROCE_LATENCY}"
        ),
        "eth_25g": LinkPreset(
            3.125, 20.0, "Ethernet 25 GbE",
            f"TCP over 25 Gb/s Ethernet at line rate (estimate); {_ETH_LATENCY}",
        ),
        "eth_100g": LinkPreset(
            12.5, 20.0, "Ethernet 100 GbE",
            f"TCP over 100 Gb/s Ethernet at line rate (estimate); {_ETH_LATENCY}",
        ),
    }
)  # fmt: skip
"""Every link kind by name; a ``gb_per_s`` of N Gb/s line rate is N / 8 GB/s."""


class LinkConfig(Frozen):
    """The link between two replicas: a preset ``kind``, optionally with its bandwidth or
    latency replaced, and the transfer ``mode`` (module docstring: ``store_and_forward`` or
    ``layerwise``, layer by layer). Invariant: ``kind`` names a preset of
    :data:`LINK_PRESETS`."""

    kind: str
    gb_per_s: Gbps | None = None
    latency_us: LatencyUs | None = None
    mode: Literal["store_and_forward", "layerwise"] = "store_and_forward"

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, data: Any) -> Any:
        """``link: ib_ndr`` is ``link: {kind: ib_ndr}``."""
        return {"kind": data} if isinstance(data, str) else data

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in LINK_PRESETS:
            known = ", ".join(sorted(LINK_PRESETS))
            raise ValueError(f"unknown link kind {kind!r}; known kinds: {known}")
        return kind

    @property
    def preset(self) -> LinkPreset:
        return LINK_PRESETS[self.kind]

    @property
    def resolved_gb_per_s(self) -> float:
        """GB/s per GPU each way: the override, else the preset's."""
        return self.gb_per_s if self.gb_per_s is not None else self.preset.gb_per_s

    @property
    def resolved_latency_us(self) -> float:
        """Latency in µs: the override, else the preset's."""
        return self.latency_us if self.latency_us is not None else self.preset.latency_us

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Bytes per second per GPU each way (:attr:`resolved_gb_per_s` × 10^9)."""
        return self.resolved_gb_per_s * 1e9

    @property
    def latency_s(self) -> float:
        """Seconds before a transfer's first byte arrives (:attr:`resolved_latency_us` × 10^-6)."""
        return self.resolved_latency_us * 1e-6

    def describe(self) -> str:
        """One line for reports: ``InfiniBand NDR: 50 GB/s per GPU each way, 0.6 µs``, with
        the overridden numbers named."""
        line = (
            f"{self.preset.name}: {self.resolved_gb_per_s:g} GB/s per GPU each way, "
            f"{self.resolved_latency_us:g} µs"
        )
        changed = [
            label
            for label, value in (("bandwidth", self.gb_per_s), ("latency", self.latency_us))
            if value is not None
        ]
        line = f"{line}, layer by layer" if self.mode == "layerwise" else line
        return f"{line} ({' and '.join(changed)} set in config)" if changed else line
