"""The prefill:decode split of a budget that serves the most requests within the SLOs
(``simkv capacity CONFIG --gpus N`` or ``--budget-per-hour B``, on a config with prefill and
decode groups).

Every split the budget buys (:func:`simkv.capacity.split_plan.plan_splits`: prefill and decode
replicas and their TP degrees, and the colocated fleets) runs the rate search of
:func:`simkv.capacity.run.find_capacity` (the highest offered rate meeting every SLO) in its own
folder. A split's goodput per GPU is that rate over the GPUs it uses; with prices, its goodput
per cost is that rate over its cost per hour (req/s per $/h). The best split is the highest
goodput per cost when the budget is money, else per GPU (ties: fewer GPUs, then the earlier
split); the factor over colocated is its goodput over the best colocated fleet's, same unit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simkv.capacity.run import CapacityOptions, CapacityResult, RoundFn, find_capacity
from simkv.capacity.split_plan import MAX_BUDGET, Budget, Split, plan_splits
from simkv.config.fleet_options import DEFAULT_CURRENCY
from simkv.outputs import write_file

__all__ = ["MAX_BUDGET", "Budget", "Split", "SplitResult", "best", "find_splits", "plan_splits"]
SPLITS_FILE = "splits.json"
"""The search's answer and every split's, in the output folder."""


@dataclass(frozen=True)
class SplitResult:
    """One split's rate search."""

    split: Split
    found: CapacityResult

    @property
    def rate(self) -> float | None:
        """The highest rate meeting the SLOs (None: none does, or a run failed)."""
        result = self.found.search
        return result.answer if self.found.failure is None else None

    @property
    def goodput_per_gpu(self) -> float | None:
        """Requests/s within the SLOs per GPU of the split."""
        rate = self.rate
        return None if rate is None else rate / self.split.gpus

    @property
    def goodput_per_cost(self) -> float | None:
        """Requests/s within the SLOs per unit of money per hour (None without prices)."""
        rate, cost = self.rate, self.split.cost_per_hour
        return None if rate is None or not cost else rate / cost


def _score(result: SplitResult, by_cost: bool) -> float | None:
    return result.goodput_per_cost if by_cost else result.goodput_per_gpu


def best(results: list[SplitResult], by_cost: bool = False) -> SplitResult | None:
    """The highest goodput per GPU (``by_cost``: per cost; ties: fewer GPUs, then the earlier
    split); None when no split meets the SLOs."""
    scored = [(-(_score(r, by_cost) or 0.0), r.split.gpus, i, r)
              for i, r in enumerate(results) if _score(r, by_cost) is not None]  # fmt: skip
    return min(scored, key=lambda item: item[:3])[3] if scored else None


def over_colocated(results: list[SplitResult], by_cost: bool = False) -> float | None:
    """The best split's score over the best colocated fleet's (None: either has none, or the
    best is colocated itself)."""
    top = best(results, by_cost)
    home = best([r for r in results if r.split.prefill == 0], by_cost)
    if top is None or home is None or top.split.prefill == 0:
        return None
    return (_score(top, by_cost) or 0.0) / (_score(home, by_cost) or 1.0)


def find_splits(
    config: Path, sets: list[str], out: Path, opts: CapacityOptions, splits: list[Split],
    budget: Budget, on_round: RoundFn | None = None,
) -> list[SplitResult]:  # fmt: skip
    """Run the rate search of each of ``splits`` (:func:`plan_splits` of ``budget``) into
    ``out/<split name>``; write ``out/splits.json``."""
    results = []
    for split in splits:
        found = find_capacity(config, [*sets, *split.sets], out / split.name, opts, on_round)
        results.append(SplitResult(split, found))
    text = json.dumps(record(results, budget, opts), indent=2) + "\n"
    write_file(out / SPLITS_FILE, text)
    return results


def record(results: list[SplitResult], budget: Budget, opts: CapacityOptions) -> dict[str, Any]:
    """splits.json: the budget, the best split, the factor over colocated, every split."""
    by_cost = budget.per_hour is not None
    top = best(results, by_cost)
    return {
        "search": "splits", "gpus": budget.gpus, "budget_per_hour": budget.per_hour,
        "currency": DEFAULT_CURRENCY, "price_per_gpu_hour": None if budget.prices is None
        else {"prefill": budget.prices[0], "decode": budget.prices[1]},
        "tp_prefill": None if budget.tp_prefill is None else list(budget.tp_prefill),
        "tp_decode": None if budget.tp_decode is None else list(budget.tp_decode),
        "rate_min": opts.rate_min, "rate_max": opts.rate_max,
        "ranked_by": "goodput_per_cost" if by_cost else "goodput_per_gpu",
        "best": None if top is None else top.split.name,
        "over_colocated": over_colocated(results, by_cost),
        "splits": [_row(r) for r in results],
    }  # fmt: skip


def _row(r: SplitResult) -> dict[str, Any]:
    return {
        "name": r.split.name, "prefill_replicas": r.split.prefill,
        "decode_replicas": r.split.decode, "tp_prefill": r.split.tp_prefill,
        "tp_decode": r.split.tp_decode, "gpus": r.split.gpus,
        "cost_per_hour": r.split.cost_per_hour, "colocated": r.split.prefill == 0,
        "outcome": r.found.search.outcome, "meets": r.rate is not None,
        "answer_rate": r.rate, "goodput_per_gpu": r.goodput_per_gpu,
        "goodput_per_cost": r.goodput_per_cost, "set": list(r.split.sets),
    }  # fmt: skip
