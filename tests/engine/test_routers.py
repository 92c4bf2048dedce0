"""Each router's choice on a tiny fleet whose loads are written down by hand, and the stale
view end to end (simkv.engine.routers, simkv.engine.fleet_view)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simkv.config.fleet import FleetConfig
from simkv.engine.routers import build_router
from tests.engine.helpers import run, tiny_config


@dataclass
class View:
    """A hand-written fleet view: loads per replica, cached prefix tokens, prompt length."""

    outstanding: list[int]
    tokens: list[int]
    usage: list[float]
    hits: list[int] = field(default_factory=list)
    prompt: int = 100

    @property
    def size(self) -> int:
        return len(self.outstanding)

    def loads(self) -> tuple[list[int], list[int], list[float]]:
        return self.outstanding, self.tokens, self.usage

    def prompt_tokens(self, i: int) -> int:
        return self.prompt

    def prefix_tokens(
        self, i: int, now: float, weights: dict[str, float] | None = None
    ) -> list[float]:
        assert weights is None  # (tier weights: tests/engine/test_tiers.py)
        return self.hits or [0] * self.size


def _router(spec: dict[str, Any], sessions: list[int] | None = None, seed: int = 0) -> Any:
    cfg = FleetConfig.model_validate({"router": spec, "replicas": [{"count": 1}]}).router
    workload = SimpleNamespace(session_id=None if sessions is None else np.array(sessions))
    return build_router(cfg, np.random.default_rng(seed), workload)  # type: ignore[arg-type]


def _choices(router: Any, view: View, n: int) -> list[int]:
    return [router.choose(i, 0.0, view) for i in range(n)]


LOADS = View(outstanding=[3, 1, 1], tokens=[100, 900, 50], usage=[0.2, 0.1, 0.1])


def test_round_robin_takes_replicas_in_turn() -> None:
    assert _choices(_router({"kind": "round_robin"}), LOADS, 5) == [0, 1, 2, 0, 1]


def test_random_is_seeded_and_spreads() -> None:
    a = _choices(_router({"kind": "random"}, seed=7), LOADS, 200)
    b = _choices(_router({"kind": "random"}, seed=7), LOADS, 200)
    assert a == b and set(a) == {0, 1, 2}
    assert a != _choices(_router({"kind": "random"}, seed=8), LOADS, 200)


def test_least_outstanding_breaks_ties_by_index() -> None:
    assert _router({"kind": "least_outstanding"}).choose(0, 0.0, LOADS) == 1


def test_least_kv_usage_breaks_ties_by_outstanding_then_index() -> None:
    view = View(outstanding=[0, 2, 1], tokens=[0, 0, 0], usage=[0.3, 0.1, 0.1])
    assert _router({"kind": "least_kv_usage"}).choose(0, 0.0, view) == 2


def test_shortest_queue_tokens_reads_tokens_not_requests() -> None:
    assert _router({"kind": "shortest_queue_tokens"}).choose(0, 0.0, LOADS) == 2


def test_prefix_aware_follows_sglangs_three_cases() -> None:
    router = _router({"kind": "prefix_aware", "balance_abs_threshold": 2})
    # balanced (max - min = 2, not > 2): the longest hit, 60 of 100 tokens > 0.5
    hit = View(outstanding=[3, 1, 2], tokens=[0] * 3, usage=[0.5, 0.2, 0.4], hits=[0, 16, 60])
    assert router.choose(0, 0.0, hit) == 2
    # the best hit covers 40 of 100 tokens, not more than half: the least-used KV pool
    low = View(outstanding=[3, 1, 2], tokens=[0] * 3, usage=[0.5, 0.2, 0.4], hits=[0, 16, 40])
    assert router.choose(0, 0.0, low) == 1
    # imbalanced (5 - 1 > 2 and 5 > 1.0001 × 1): the least loaded, whatever the hits
    busy = View(outstanding=[1, 5, 3], tokens=[0] * 3, usage=[0.9, 0.1, 0.1], hits=[0, 90, 0])
    assert router.choose(0, 0.0, busy) == 0


def test_session_affinity_keeps_a_session_on_its_first_replica() -> None:
    router = _router({"kind": "session_affinity", "first": "round_robin"}, [7, 8, 7, 9, 8])
    assert _choices(router, LOADS, 5) == [0, 1, 0, 2, 1]


def test_weighted_sums_normalised_scores() -> None:
    # queue 1 - o/3: [0, 2/3, 2/3]; kv 1 - u: [.8, .9, .9]; prefix h/100: [.5, 0, .2]
    view = View(outstanding=[3, 1, 1], tokens=[0] * 3, usage=[0.2, 0.1, 0.1], hits=[50, 0, 20])
    router = _router({"kind": "weighted", "weights": {"queue": 1, "kv_usage": 1, "prefix": 1}})
    assert router.choose(0, 0.0, view) == 2  # 1.3, 1.5667, 1.7667
    heavy = {"kind": "weighted", "weights": {"queue": 0, "kv_usage": 0, "prefix": 5}}
    assert _router(heavy).choose(0, 0.0, view) == 0


def _fleet_run(tmp_path: Path, router: str, staleness_ms: float) -> list[int]:
    """Four requests 1 ms apart on two replicas, none finished before the last arrives
    (each step takes ≥ 11 ms); which replica each went to."""
    requests = [(0.000, 4, 8), (0.001, 4, 8), (0.002, 4, 8), (0.003, 4, 8)]
    fleet = {"router": {"kind": router}, "staleness_ms": staleness_ms,
             "replicas": [{"count": 2}]}  # fmt: skip
    cfg = tiny_config(tmp_path, requests, {"kind": "vllm_v1"}, num_blocks=32, fleet=fleet)
    return run(cfg, tmp_path).requests["replica"].tolist()


def test_a_live_view_balances_at_once(tmp_path: Path) -> None:
    assert _fleet_run(tmp_path, "least_outstanding", 0) == [0, 1, 0, 1]


def test_a_stale_view_herds_until_its_refresh(tmp_path: Path) -> None:
    # the refresh at t = 0 comes after the arrival at 0 (the refresher starts last): it sees
    # [1, 0] outstanding, which holds until 1 s: every later request to replica 1
    assert _fleet_run(tmp_path, "least_outstanding", 1000) == [0, 1, 1, 1]
    # every 2.5 ms: the requests at 1 and 2 ms see t = 0's [1, 0]; the one at 3 ms sees
    # t = 2.5 ms's [1, 2] (live: [0, 1, 0, 1])
    assert _fleet_run(tmp_path, "least_outstanding", 2.5) == [0, 1, 1, 0]


@pytest.mark.parametrize("router", ["round_robin", "least_kv_usage", "prefix_aware"])
def test_every_request_is_served_once(tmp_path: Path, router: str) -> None:
    replicas = _fleet_run(tmp_path, router, 0)
    assert len(replicas) == 4 and set(replicas) <= {0, 1}


def test_session_affinity_keeps_every_turn_of_a_closed_loop_session_together() -> None:
    from simkv.run import load_config, simulate
    from simkv.workload.build import build_workload

    path = Path(__file__).resolve().parents[2] / "configs" / "multi_turn.yaml"
    fleet = FleetConfig.model_validate(
        {"router": {"kind": "session_affinity"}, "replicas": [{"count": 3}]}
    )
    cfg = load_config(path, ["workload.num_sessions=40"]).model_copy(update={"fleet": fleet})
    workload = build_workload(cfg.workload, np.random.default_rng(cfg.seed), path.parent)
    assert workload.session_id is not None and workload.turn is not None
    assert (workload.turn > 0).sum() > 40  # follow-up turns, routed at their release
    replicas = simulate(cfg, path.parent).requests["replica"].to_numpy()
    per_session = pd.Series(replicas).groupby(workload.session_id).nunique()
    assert (per_session == 1).all() and len(set(replicas)) == 3


def _mooncake_fleet(tmp_path: Path, router: str) -> pd.DataFrame:
    """Three Mooncake-format requests (512-token units named by hash ids), 10 s apart so
    each has finished (its blocks cached, free) before the next: A = units [1, 2, 3] of 1,100
    tokens, B = [1, 2, 4] (A's first 1,024 tokens), C = [9, 10]; two replicas."""
    tmp_path.mkdir()
    trace = tmp_path / "trace.jsonl"
    rows = [(0, 1100, [1, 2, 3]), (10_000, 1100, [1, 2, 4]), (20_000, 600, [9, 10])]
    trace.write_text("".join(
        f'{{"timestamp": {t}, "input_length": {n}, "output_length": 2, "hash_ids": {ids}}}\n'
        for t, n, ids in rows
    ))  # fmt: skip
    root = Path(__file__).resolve().parents[2] / "configs" / "mooncake.yaml"
    overrides = [f"workload.path={trace}", "workload.time_scale=1.0",
                 f"fleet={{router: {{kind: {router}}}, replicas: [{{count: 2}}]}}"]  # fmt: skip
    from simkv.run import load_config

    return run(load_config(root, overrides), tmp_path).requests


def test_prefix_aware_sends_a_shared_prefix_where_it_is_cached(tmp_path: Path) -> None:
    # A: no hit anywhere, loads equal: replica 0. B: 1,024 of its 1,100 tokens cached on
    # replica 0 (> half): replica 0, and it hits them. C: no hit: the least-used pool (tie
    # at 0 blocks in use, 0 outstanding): replica 0.
    aware = _mooncake_fleet(tmp_path / "aware", "prefix_aware")
    assert aware["replica"].tolist() == [0, 0, 0]
    assert aware["prefix_hit_tokens"].tolist() == [0, 1024, 0]
    # round robin sends B to replica 1, whose cache is empty
    rr = _mooncake_fleet(tmp_path / "rr", "round_robin")
    assert rr["replica"].tolist() == [0, 1, 0]
    assert rr["prefix_hit_tokens"].tolist() == [0, 0, 0]
