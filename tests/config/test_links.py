"""Link presets between replicas: lookup, overrides, the bare-name shorthand and bad kinds
(simkv.config.links)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from simkv.config.base import Frozen, parse_yaml, validate
from simkv.config.links import LINK_PRESETS, LinkConfig
from simkv.errors import InputError


class Holder(Frozen):
    """A config section holding one link, as the disaggregation config will."""

    link: LinkConfig


def _load(text: str) -> LinkConfig:
    return validate(Holder, parse_yaml(text, "links.yaml")).link


EXPECTED = {  # kind: (GB/s, µs), the numbers the presets promise
    "nvlink3": (300, 2), "nvlink4": (450, 2), "nvlink5": (900, 2),
    "pcie4": (31.5, 4.1), "pcie5": (63, 4.1), "pcie6": (118, 4.1),
    "ib_hdr": (25, 0.6), "ib_ndr": (50, 0.6), "ib_xdr": (100, 0.6),
    "roce_100g": (12.5, 0.8), "roce_200g": (25, 0.8), "roce_400g": (50, 0.8),
    "eth_25g": (3.125, 20), "eth_100g": (12.5, 20),
}  # fmt: skip


def test_every_preset_has_its_numbers_and_a_source() -> None:
    assert set(LINK_PRESETS) == set(EXPECTED)
    for kind, (gb_per_s, latency_us) in EXPECTED.items():
        preset = LINK_PRESETS[kind]
        assert (preset.gb_per_s, preset.latency_us) == (gb_per_s, latency_us), kind
        assert preset.name and len(preset.source) > 20, kind


def test_a_preset_resolves_to_bytes_per_second_and_seconds() -> None:
    link = LinkConfig(kind="ib_ndr")
    assert link.bandwidth_bytes_per_s == 50e9
    assert math.isclose(link.latency_s, 0.6e-6, rel_tol=1e-12)
    assert link.describe() == "InfiniBand NDR: 50 GB/s per GPU each way, 0.6 µs"


def test_overrides_replace_the_preset_numbers() -> None:
    link = LinkConfig(kind="pcie5", gb_per_s=40, latency_us=10)
    assert link.bandwidth_bytes_per_s == 40e9
    assert math.isclose(link.latency_s, 10e-6, rel_tol=1e-12)
    assert link.describe() == (
        "PCIe 5.0 x16: 40 GB/s per GPU each way, 10 µs (bandwidth and latency set in config)"
    )
    only_latency = LinkConfig(kind="pcie5", latency_us=0)
    assert only_latency.bandwidth_bytes_per_s == 63e9 and only_latency.latency_s == 0
    assert only_latency.describe().endswith("0 µs (latency set in config)")


def test_a_bare_name_in_yaml_is_the_preset() -> None:
    assert _load("link: roce_200g\n") == LinkConfig(kind="roce_200g")
    assert _load("link: {kind: roce_200g}\n") == LinkConfig(kind="roce_200g")
    assert _load("link: {kind: eth_25g, gb_per_s: 2}\n").bandwidth_bytes_per_s == 2e9


def test_an_unknown_kind_lists_the_known_ones() -> None:
    with pytest.raises(InputError) as err:
        _load("# the link\nlink: infiniband\n")
    text = err.value.format()
    assert "links.yaml:2" in text and "unknown link kind 'infiniband'" in text
    assert all(kind in text for kind in LINK_PRESETS)
    with pytest.raises(ValidationError, match="known kinds: eth_100g, eth_25g"):
        LinkConfig(kind="nvlink")


@pytest.mark.parametrize("bad", [0, -1, -1e-9, 1e12, "fast", True])
def test_a_bandwidth_must_be_a_positive_number_in_range(bad: object) -> None:
    with pytest.raises(ValidationError):
        LinkConfig.model_validate({"kind": "ib_ndr", "gb_per_s": bad})


@pytest.mark.parametrize("bad", [-1, 1e12])
def test_a_latency_must_be_in_range(bad: float) -> None:
    with pytest.raises(ValidationError):
        LinkConfig(kind="ib_ndr", latency_us=bad)


def test_unknown_keys_and_modes_are_refused() -> None:
    with pytest.raises(InputError, match="unknown key"):
        _load("link: {kind: ib_ndr, bandwith: 3}\n")
    with pytest.raises(ValidationError):
        LinkConfig.model_validate({"kind": "ib_ndr", "mode": "cut_through"})


def test_the_mode_is_store_and_forward_unless_layerwise_is_asked() -> None:
    assert _load("link: ib_ndr\n").mode == "store_and_forward"
    link = _load("link: {kind: ib_ndr, mode: layerwise}\n")
    assert link.mode == "layerwise" and link.bandwidth_bytes_per_s == 50e9
    assert link.describe() == "InfiniBand NDR: 50 GB/s per GPU each way, 0.6 µs, layer by layer"
    with pytest.raises(InputError) as err:
        _load("link: {kind: ib_ndr, mode: layer_wise}\n")
    assert "links.yaml:1" in err.value.format()
