"""KV tier configs (simkv.config.tiers): capacities, bandwidths by medium and TP, and the
media table of docs/kv-tiers.md kept equal to the presets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from simkv.config.fleet import FleetConfig
from simkv.config.tiers import TIER_MEDIA, TierConfig, check_tier_list

DOC = Path(__file__).resolve().parents[2] / "docs" / "kv-tiers.md"


def test_the_docs_table_lists_every_medium_with_its_numbers() -> None:
    rows = re.findall(
        r"^\| `(\w+)` \| (\w+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", DOC.read_text(), re.M
    )
    table = {name: (kind, float(r), float(w), float(lat)) for name, kind, r, w, lat in rows}
    assert table == {
        name: (m.kind, m.read_gb_per_s, m.write_gb_per_s, m.latency_us)
        for name, m in TIER_MEDIA.items()
    }


def test_a_cpu_tier_moves_at_the_host_link_times_tp_and_a_disk_at_its_medium() -> None:
    cpu = TierConfig(kind="cpu", capacity_gib=1)
    assert cpu.bandwidths(31.5, 4) == (4 * 31.5e9, 4 * 31.5e9)
    assert cpu.latency_s == pytest.approx(10e-6)
    disk = TierConfig(kind="disk", capacity_blocks=5, medium="nvme_gen4", read_gb_per_s=2)
    assert disk.bandwidths(31.5, 4) == (2e9, 6.9e9)  # an override wins; no TP scaling
    assert disk.blocks(123) == 5
    assert TierConfig(kind="cpu", capacity_gib=1).blocks(1 << 20) == 1024


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"kind": "cpu"}, "capacity_gib or capacity_blocks"),
        ({"kind": "cpu", "capacity_gib": 1, "capacity_blocks": 2}, "capacity_gib or"),
        ({"kind": "disk", "capacity_gib": 1}, "needs a medium"),
        ({"kind": "disk", "capacity_gib": 1, "medium": "pcie5"}, "is a cpu medium"),
        ({"kind": "cpu", "capacity_gib": 1, "medium": "floppy"}, "unknown medium"),
    ],
)
def test_bad_tiers_are_refused(fields: dict[str, object], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        TierConfig.model_validate(fields)


def test_tier_order() -> None:
    cpu = TierConfig(kind="cpu", capacity_gib=1)
    disk = TierConfig(kind="disk", capacity_gib=1, medium="nvme_gen4")
    assert check_tier_list([cpu, disk]) == [cpu, disk]
    with pytest.raises(ValueError, match="cpu, then disk"):
        check_tier_list([disk, cpu])


def test_stored_blocks_prompt_belongs_to_a_replicas_first_tier_only() -> None:
    first = TierConfig(kind="cpu", capacity_gib=1, stored_blocks="prompt")
    disk = TierConfig(kind="disk", capacity_gib=1, medium="nvme_gen4")
    assert check_tier_list([first, disk]) == [first, disk]
    with pytest.raises(ValueError, match="first tier only"):
        check_tier_list([TierConfig(kind="cpu", capacity_gib=1), disk.model_copy(
            update={"stored_blocks": "prompt"})])  # fmt: skip
    with pytest.raises(ValidationError, match="not on the shared one"):
        FleetConfig.model_validate({
            "replicas": [{"count": 2}],
            "remote_tier": {"kind": "remote", "capacity_gib": 1, "medium": "rdma_200g",
                            "stored_blocks": "prompt"},
        })  # fmt: skip
