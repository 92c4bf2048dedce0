"""The prefill:decode split of a GPU budget that serves the most requests within the SLOs
(``simkv capacity CONFIG --gpus N`` on a config with prefill and decode groups).

Every split of the budget is a config of its own: ``p`` prefill and ``d`` decode replicas
with ``p × tp_prefill + d × tp_decode ≤ N`` and ``d`` the most that fit beside ``p`` (a GPU
left over cannot host another decode replica), ``p`` from 1 while a decode replica still fits;
and, in the same comparison, the colocated fleet of the budget: the decode group's engine as
``mixed`` replicas, ``N // tp_decode`` of them, without ``disaggregation``. Each runs the rate
search of :func:`simkv.capacity.run.find_capacity` (the highest offered rate meeting every
SLO) in its own folder; a split's goodput per GPU is that rate over the GPUs it uses. The best
split is the highest goodput per GPU (ties: fewer GPUs, then the earlier split).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simkv.capacity.run import CapacityOptions, CapacityResult, RoundFn, find_capacity
from simkv.errors import InputError
from simkv.outputs import write_file
from simkv.run import load_config

MAX_BUDGET = 256
"""Most GPUs of a split search (each split is a rate search of its own)."""


@dataclass(frozen=True)
class Split:
    """One way to spend the budget: its folder name, replicas per side (0 prefill: the
    colocated fleet of ``decode`` mixed replicas), GPUs used and the ``--set`` items."""

    name: str
    prefill: int
    decode: int
    gpus: int
    sets: tuple[str, ...]


def plan_splits(config: Path, sets: list[str], budget: int) -> list[Split]:
    """The splits of ``budget`` GPUs for ``config`` (module docstring); :class:`InputError`
    unless its fleet is one prefill and one decode group and a split fits."""
    if not 2 <= budget <= MAX_BUDGET:
        raise InputError(f"expected 2..{MAX_BUDGET} GPUs, got {budget}", field="--gpus")
    cfg = load_config(config, sets)
    fleet = cfg.fleet
    roles = [] if fleet is None else [group.role for group in fleet.replicas]
    if sorted(roles) != ["decode", "prefill"] or fleet is None:
        raise InputError(
            "needs a fleet of one prefill and one decode group (role: prefill, role: decode)",
            field="--gpus",
        )
    kp, kd = roles.index("prefill"), roles.index("decode")
    groups = cfg.group_configs()
    tp_p, tp_d = (groups[k].parallel.tensor_parallel for k in (kp, kd))
    out = []
    for p in range(1, budget + 1):
        d = (budget - p * tp_p) // tp_d
        if d < 1:
            break
        counts = (f"fleet.replicas.{kp}.count={p}", f"fleet.replicas.{kd}.count={d}")
        out.append(Split(f"p{p}-d{d}", p, d, p * tp_p + d * tp_d, counts))
    if not out:
        raise InputError(
            f"{budget} GPUs fit no prefill replica (TP {tp_p}) beside a decode one (TP {tp_d})",
            field="--gpus",
        )
    n = budget // tp_d
    colocated = fleet.replicas[kd].model_dump(mode="json", exclude_none=True)
    colocated.update(role="mixed", count=n, name="colocated")
    out.append(Split(f"colocated-{n}", 0, n, n * tp_d, (
        "fleet.disaggregation=null", f"fleet.replicas=[{json.dumps(colocated)}]",
    )))  # fmt: skip
    return out


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


def best(results: list[SplitResult]) -> SplitResult | None:
    """The highest goodput per GPU (ties: fewer GPUs, then the earlier split)."""
    scored = [(-(r.goodput_per_gpu or 0.0), r.split.gpus, i, r)
              for i, r in enumerate(results) if r.goodput_per_gpu is not None]  # fmt: skip
    return min(scored, key=lambda item: item[:3])[3] if scored else None


def find_splits(
    config: Path, sets: list[str], out: Path, opts: CapacityOptions, splits: list[Split],
    budget: int, on_round: RoundFn | None = None,
) -> list[SplitResult]:  # fmt: skip
    """Run the rate search of each of ``splits`` (:func:`plan_splits` of ``budget`` GPUs)
    into ``out/<split name>``; write ``out/splits.json``."""
    results = []
    for split in splits:
        found = find_capacity(config, [*sets, *split.sets], out / split.name, opts, on_round)
        results.append(SplitResult(split, found))
    write_file(out / "splits.json", json.dumps(_record(results, budget), indent=2) + "\n")
    return results


def _record(results: list[SplitResult], budget: int) -> dict[str, Any]:
    top = best(results)
    return {
        "search": "splits", "gpus": budget,
        "best": None if top is None else top.split.name,
        "splits": [{
            "name": r.split.name, "prefill_replicas": r.split.prefill,
            "decode_replicas": r.split.decode, "gpus": r.split.gpus,
            "colocated": r.split.prefill == 0, "outcome": r.found.search.outcome,
            "answer_rate": r.rate, "goodput_per_gpu": r.goodput_per_gpu,
            "set": list(r.split.sets),
        } for r in results],
    }  # fmt: skip
