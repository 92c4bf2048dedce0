"""Ranking the splits (:mod:`simkv.capacity.splits`) from hand-made searches: per GPU under a
GPU budget, per cost under a money budget, ties to fewer GPUs then the earlier split, the
factor over the best colocated fleet, and splits.json's rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from simkv.capacity.run import CapacityOptions, CapacityResult
from simkv.capacity.search import SearchResult
from simkv.capacity.split_plan import Budget, Split
from simkv.capacity.splits import SplitResult, best, over_colocated, record

OPTS = CapacityOptions(rate_min=1.0, rate_max=64.0)


def _result(name: str, p: int, d: int, gpus: int, cost: float, rate: float | None) -> SplitResult:
    search = SearchResult("found" if rate else "none_meets", rate, None, (), 1)
    split = Split(name, p, d, gpus, (), 1, 1, cost)
    return SplitResult(split, CapacityResult(search, Path(name), "workload.arrival.rate", 1, 0))


RESULTS = [
    _result("p1-d3", 1, 3, 4, 9.0, 20.0),  # 5 per GPU, 2.22 per $/h
    _result("p2-d2", 2, 2, 4, 10.0, 24.0),  # 6 per GPU, 2.4 per $/h
    _result("p1-d1", 1, 1, 2, 5.0, 12.0),  # 6 per GPU, 2.4 per $/h: fewer GPUs wins the tie
    _result("p3-d1", 3, 1, 4, 11.0, None),
    _result("colocated-4", 0, 4, 4, 8.0, 16.0),  # 4 per GPU, 2 per $/h
]


def test_the_best_is_per_gpu_or_per_cost_with_ties_to_fewer_gpus() -> None:
    assert best(RESULTS) is RESULTS[2] and best(RESULTS, by_cost=True) is RESULTS[2]
    assert best(RESULTS[:2]) is RESULTS[1]  # 6 > 5 per GPU
    # per cost p1-d3 (20/9 = 2.22) beats colocated (2) though colocated's GPUs are as many
    assert best([RESULTS[0], RESULTS[4]], by_cost=True) is RESULTS[0]
    assert best([RESULTS[3]]) is None


def test_the_factor_over_colocated_is_in_the_ranking_unit() -> None:
    assert over_colocated(RESULTS) == pytest.approx(6 / 4)
    assert over_colocated(RESULTS, by_cost=True) == pytest.approx(2.4 / 2)
    assert over_colocated(RESULTS[4:]) is None  # the best is colocated itself
    assert over_colocated(RESULTS[:4]) is None  # no colocated fleet met the SLOs


def test_a_gpu_budget_with_prices_ranks_per_gpu_and_shows_cost() -> None:
    data = record(RESULTS, Budget(gpus=4, prices=(3.0, 2.0)), OPTS)
    assert data["ranked_by"] == "goodput_per_gpu" and data["best"] == "p1-d1"
    assert data["price_per_gpu_hour"] == {"prefill": 3.0, "decode": 2.0}
    rows = {row["name"]: row for row in data["splits"]}
    assert rows["p2-d2"]["goodput_per_cost"] == pytest.approx(2.4)
    assert rows["p3-d1"]["meets"] is False and rows["p3-d1"]["goodput_per_gpu"] is None
    assert rows["colocated-4"]["colocated"] is True
