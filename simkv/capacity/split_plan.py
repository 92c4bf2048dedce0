"""The plan of a prefill:decode split search: which splits a budget buys.

A budget is GPUs (``--gpus N``), money per hour (``--budget-per-hour B`` at
``--price-per-gpu-hour``) or both (a split must fit each). A split is ``p`` prefill replicas of
tensor-parallel degree ``tp_p`` and ``d`` decode replicas of ``tp_d``: it uses
``p × tp_p + d × tp_d`` GPUs and costs ``p × tp_p × price_p + d × tp_d × price_d`` per hour;
for each (``tp_p``, ``tp_d``) pair of the TP lists (the config's degrees when none is given),
``p`` runs from 1 while a decode replica still fits beside it, and ``d`` is the most that fit
(a GPU or a dollar left over cannot host another decode replica). The colocated fleets join the
same comparison: for each decode degree ``tp_d``, the decode group's engine as ``mixed``
replicas at ``tp_d``, as many as the budget buys, without ``disaggregation``. Prices are the
user's (as for ``--options``: no price list ships with simkv), per GPU-hour; a colocated replica
is priced as a decode one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simkv.config.sim import SimConfig
from simkv.errors import InputError
from simkv.run import load_config

MAX_BUDGET = 256
"""Most GPUs of a split search (each split is a rate search of its own)."""
MAX_SPLITS = 256
"""Most splits of one plan (each split is a rate search of its own)."""
MAX_TP = 64
"""Largest tensor-parallel degree a TP list may name."""
FIT_SLACK = 1e-9
"""Relative slack of the cost test, so a budget of exactly ``n`` prices buys ``n`` GPUs in
floating point."""


@dataclass(frozen=True)
class Budget:
    """What the splits may spend: ``gpus`` (None: any count), ``per_hour`` (money per hour;
    None: any cost), ``prices`` per GPU-hour of a (prefill, decode) GPU (None: no costs), and
    the TP degrees tried per side (None: the config's)."""

    gpus: int | None = None
    per_hour: float | None = None
    prices: tuple[float, float] | None = None
    tp_prefill: tuple[int, ...] | None = None
    tp_decode: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Split:
    """One way to spend the budget: its folder name, replicas and TP per side (0 prefill: the
    colocated fleet of ``decode`` mixed replicas), GPUs used, cost per hour (None without
    prices) and the ``--set`` items."""

    name: str
    prefill: int
    decode: int
    gpus: int
    sets: tuple[str, ...]
    tp_prefill: int = 1
    tp_decode: int = 1
    cost_per_hour: float | None = None


def parse_tp_list(text: str | None, flag: str) -> tuple[int, ...] | None:
    """``"1,2"`` → ``(1, 2)``: distinct degrees in 1..:data:`MAX_TP`, in the order given."""
    if text is None:
        return None
    items = [item.strip() for item in text.split(",")]
    if not all(item.isdigit() and 1 <= int(item) <= MAX_TP for item in items):
        raise InputError(f"expected a comma list of TP degrees in 1..{MAX_TP}, got {text!r}",
                         field=flag)  # fmt: skip
    degrees = tuple(int(item) for item in items)
    if len(set(degrees)) != len(degrees):
        raise InputError(f"a TP degree is listed twice in {text!r}", field=flag)
    return degrees


def parse_prices(text: str | None) -> tuple[float, float] | None:
    """``"2.5"`` (both sides) or ``"3,2.5"`` (prefill, decode) → per GPU-hour prices > 0."""
    if text is None:
        return None
    try:
        values = [float(item) for item in text.split(",")]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or not all(0 < v <= 1e6 and math.isfinite(v) for v in values):
        raise InputError(f"expected a price per GPU-hour in (0, 1e6], or prefill,decode "
                         f"prices, got {text!r}", field="--price-per-gpu-hour")  # fmt: skip
    return (values[0], values[-1])


def check_budget(budget: Budget) -> None:
    """:class:`InputError` for a budget that names no limit, a GPU count outside
    2..:data:`MAX_BUDGET`, or money without prices."""
    if budget.gpus is not None and not 2 <= budget.gpus <= MAX_BUDGET:
        raise InputError(f"expected 2..{MAX_BUDGET} GPUs, got {budget.gpus}", field="--gpus")
    if budget.per_hour is None:
        if budget.gpus is None:
            raise InputError("the split search needs --gpus or --budget-per-hour",
                             field="--budget-per-hour")  # fmt: skip
        return
    if budget.prices is None:
        raise InputError("a budget per hour needs --price-per-gpu-hour",
                         field="--budget-per-hour")  # fmt: skip
    if not 0 < budget.per_hour <= 1e9 or not math.isfinite(budget.per_hour):
        raise InputError(f"expected a budget in (0, 1e9], got {budget.per_hour:g}",
                         field="--budget-per-hour")  # fmt: skip
    if budget.gpus is None and budget.per_hour >= (MAX_BUDGET + 1) * min(budget.prices):
        raise InputError(f"{budget.per_hour:g} per hour buys more than {MAX_BUDGET} GPUs: "
                         "a smaller budget, or --gpus too", field="--budget-per-hour")  # fmt: skip


def _fits(budget: Budget, used_gpus: int, used_cost: float, tp: int, price: float) -> int:
    """How many more replicas of ``tp`` GPUs at ``price`` per GPU-hour fit beside what is used
    (GPUs and money per hour)."""
    most = MAX_BUDGET // tp
    if budget.gpus is not None:
        most = min(most, (budget.gpus - used_gpus) // tp)
    if budget.per_hour is not None:
        left = budget.per_hour * (1 + FIT_SLACK) - used_cost
        most = min(most, math.floor(left / (tp * price)) if left > 0 else 0)
    return max(most, 0)


def plan_splits(config: Path, sets: list[str], budget: Budget) -> list[Split]:
    """The splits ``budget`` buys for ``config`` (module docstring), colocated last;
    :class:`InputError` unless its fleet is one prefill and one decode group, every TP degree
    suits the model, and a split fits."""
    check_budget(budget)
    cfg = load_config(config, sets)
    roles = [] if cfg.fleet is None else [group.role for group in cfg.fleet.replicas]
    if sorted(roles) != ["decode", "prefill"] or cfg.fleet is None:
        raise InputError(
            "needs a fleet of one prefill and one decode group (role: prefill, role: decode)",
            field="--gpus" if budget.gpus is not None else "--budget-per-hour",
        )
    kp, kd = roles.index("prefill"), roles.index("decode")
    groups = cfg.group_configs()
    sides = [(kp, budget.tp_prefill, "--tp-prefill"), (kd, budget.tp_decode, "--tp-decode")]
    parallel = [_parallel_sets(config, sets, cfg, k, tps, flag) for k, tps, flag in sides]
    tps_p = budget.tp_prefill or (groups[kp].parallel.tensor_parallel,)
    tps_d = budget.tp_decode or (groups[kd].parallel.tensor_parallel,)
    named = budget.tp_prefill is not None or budget.tp_decode is not None
    out = [
        split
        for tp_p in tps_p
        for tp_d in tps_d
        for split in _disaggregated(budget, (kp, kd), (tp_p, tp_d), parallel, named)
    ]
    if not out:
        raise InputError(_no_split(budget, tps_p, tps_d), field=_budget_flag(budget))
    out += _colocated(cfg, kd, budget, tps_d, named)
    if len(out) > MAX_SPLITS:
        raise InputError(f"{len(out)} splits planned, at most {MAX_SPLITS} (each is a rate "
                         "search): a smaller budget or fewer TP degrees",
                         field=_budget_flag(budget))  # fmt: skip
    return out


def _disaggregated(
    budget: Budget, groups: tuple[int, int], tps: tuple[int, int],
    parallel: list[dict[int, tuple[str, ...]]], named: bool,
) -> list[Split]:  # fmt: skip
    """The splits of prefill group ``groups[0]`` at TP ``tps[0]`` beside decode group
    ``groups[1]`` at ``tps[1]``: ``p`` from 1 while a decode replica fits, ``d`` the most that
    fit; ``parallel`` holds each side's ``--set`` item per TP degree (none: the config's)."""
    (kp, kd), (tp_p, tp_d) = groups, tps
    price_p, price_d = budget.prices or (0.0, 0.0)
    extra = (*parallel[0].get(tp_p, ()), *parallel[1].get(tp_d, ()))
    out = []
    for p in range(1, _fits(budget, 0, 0.0, tp_p, price_p) + 1):
        d = _fits(budget, p * tp_p, p * tp_p * price_p, tp_d, price_d)
        if d < 1:
            break
        name = f"p{p}tp{tp_p}-d{d}tp{tp_d}" if named else f"p{p}-d{d}"
        counts = (f"fleet.replicas.{kp}.count={p}", f"fleet.replicas.{kd}.count={d}")
        cost = _cost(budget, p * tp_p, d * tp_d)
        out.append(Split(name, p, d, p * tp_p + d * tp_d, (*counts, *extra), tp_p, tp_d, cost))
    return out


def _budget_flag(budget: Budget) -> str:
    return "--gpus" if budget.per_hour is None else "--budget-per-hour"


def _cost(budget: Budget, prefill_gpus: int, decode_gpus: int) -> float | None:
    """Money per hour of the GPUs (None without prices)."""
    if budget.prices is None:
        return None
    return prefill_gpus * budget.prices[0] + decode_gpus * budget.prices[1]


def _no_split(budget: Budget, tps_p: tuple[int, ...], tps_d: tuple[int, ...]) -> str:
    have = " and ".join(
        part for part in (
            None if budget.gpus is None else f"{budget.gpus} GPUs",
            None if budget.per_hour is None else f"{budget.per_hour:g} per hour",
        ) if part
    )  # fmt: skip
    tp = lambda tps: "/".join(map(str, tps))  # noqa: E731
    return f"{have} fit no prefill replica (TP {tp(tps_p)}) beside a decode one (TP {tp(tps_d)})"


def _parallel_sets(
    config: Path, sets: list[str], cfg: SimConfig, k: int, tps: tuple[int, ...] | None,
    flag: str,
) -> dict[int, tuple[str, ...]]:  # fmt: skip
    """Per TP degree of ``tps``, the ``--set`` item giving group ``k`` that degree (its
    resolved ``parallel`` section with ``tensor_parallel`` replaced), each checked against the
    config: a degree the model refuses is an :class:`InputError` at ``flag``."""
    if tps is None:
        return {}
    out = {}
    for tp in tps:
        item = f"fleet.replicas.{k}.parallel={json.dumps(_parallel(cfg, k, tp))}"
        try:
            load_config(config, [*sets, item])
        except InputError as err:
            raise InputError(f"TP {tp}: {err.message}", field=flag) from None
        out[tp] = (item,)
    return out


def _parallel(cfg: SimConfig, k: int, tp: int) -> dict[str, Any]:
    section = cfg.group_configs()[k].parallel.model_dump(mode="json", exclude_none=True)
    return {**section, "tensor_parallel": tp}


def _colocated(
    cfg: SimConfig, kd: int, budget: Budget, tps_d: tuple[int, ...], named: bool
) -> list[Split]:
    """Per decode degree, the colocated fleet the budget buys (none when no replica fits)."""
    if cfg.fleet is None:
        return []
    out = []
    price = budget.prices[1] if budget.prices else 0.0
    for tp in tps_d:
        n = _fits(budget, 0, 0.0, tp, price)
        if n < 1:
            continue
        group = cfg.fleet.replicas[kd].model_dump(mode="json", exclude_none=True)
        group.update(role="mixed", count=n, name="colocated")
        if named:
            group["parallel"] = _parallel(cfg, kd, tp)
        sets = ("fleet.disaggregation=null", f"fleet.replicas=[{json.dumps(group)}]")
        name = f"colocated-{n}tp{tp}" if named else f"colocated-{n}"
        out.append(Split(name, 0, n, n * tp, sets, tp, tp, _cost(budget, 0, n * tp)))
    return out
