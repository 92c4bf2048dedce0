"""A fleet of one replica is today's engine: the same frames, exactly, for every shipped
config (shortened to a few hundred requests), and a fleet run is deterministic."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from simkv.config.fleet import FleetConfig, ReplicaGroup
from simkv.run import load_config, simulate

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def _shortened(path: Path) -> list[str]:
    """Overrides keeping a few hundred requests of the config's workload."""
    text = path.read_text()
    if "num_sessions" in text:
        return ["workload.num_sessions=60"]
    if "num_requests" in text:
        return ["workload.num_requests=300"]
    return ["workload.limit=800"] if "kind: trace" in text else []


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_a_fleet_of_one_gives_the_engines_frames(path: Path) -> None:
    cfg = load_config(path, _shortened(path))
    if cfg.fleet is not None:  # a shipped fleet: its first group alone, as one engine
        cfg = cfg.group_configs()[0]
    one = cfg.model_copy(update={"fleet": FleetConfig(replicas=[ReplicaGroup()])})
    plain, fleet = simulate(cfg, path.parent), simulate(one, path.parent)
    assert fleet.replicas is not None and plain.replicas is None
    assert (fleet.requests["replica"] == 0).all()
    _same(plain.requests, fleet.requests.drop(columns="replica"))
    _same(plain.steps, fleet.steps.drop(columns="replica"))
    _same(plain.itl, fleet.itl)
    _same(plain.preemptions, fleet.preemptions)
    assert len(plain.requests) > 0


def test_a_fleet_run_is_deterministic() -> None:
    path = next(p for p in CONFIGS if p.stem == "multi_turn")
    fleet = FleetConfig.model_validate(
        {"router": {"kind": "random"}, "staleness_ms": 50, "replicas": [{"count": 3}]}
    )
    cfg = load_config(path, _shortened(path)).model_copy(update={"fleet": fleet})
    first, second = simulate(cfg, path.parent), simulate(cfg, path.parent)
    _same(first.requests, second.requests)
    _same(first.steps, second.steps)
    assert first.requests["replica"].nunique() == 3  # the draws spread the sessions


@pytest.mark.parametrize("stem", ["quickstart", "vllm_v0", "orca"])
def test_a_fleet_of_one_reports_the_engines_kv_usage(stem: str) -> None:
    """KV usage is a share of the same capacity (``simkv.run.sizing.usage_capacity``: usable blocks
    beside vLLM V1's null block, or contiguous slots) for a replica as for the engine."""
    path = next(p for p in CONFIGS if p.stem == stem)
    cfg = load_config(path, _shortened(path))
    one = cfg.model_copy(update={"fleet": FleetConfig(replicas=[ReplicaGroup()])})
    plain, fleet = simulate(cfg, path.parent).summary, simulate(one, path.parent).summary
    keys = ("mean_kv_usage", "peak_kv_usage", "mean_token_frac", "mean_free_frac")
    assert {k: fleet[k] for k in keys} == {k: plain[k] for k in keys}
