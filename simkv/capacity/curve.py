"""GPUs needed against target rate: ``simkv capacity --at-rate 4,8,16 [--options FILE]``.

One count search per target rate (one per option and rate with options,
:mod:`simkv.capacity.replicas`), each in the folder a one-rate search writes, under
``<out>/at-<rate>/`` (:func:`rate_folder`): with options ``at-<rate>/capacity.json`` compares
the options at that rate and ``at-<rate>/<option>/`` is an option's search; without,
``at-<rate>/`` is the replica search itself. ``<out>/capacity.json`` (``search: curve``) holds,
per rate in increasing order, each option's replicas, GPUs and cost per hour at its answer and
the cheapest (:func:`curve_answer`). A one-rate search keeps its own layout (``<out>/<option>/``),
so only lists of two or more rates use this one.

A failed run stops its search, as in a one-rate search; the other rates and options still run,
and the curve's outcome is ``failed`` (the point of the failed search has no answer).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from simkv.capacity.options import OptionRow
from simkv.capacity.replicas import (
    CountFound,
    CountOptions,
    CountRoundFn,
    compared,
    find_cheapest,
    find_min_count,
)
from simkv.capacity.run import CAPACITY_FILE, write_json
from simkv.config.fleet_options import FleetOptions
from simkv.errors import InputError

MAX_RATES = 32
"""Most target rates of one curve (each is a search of its own, per option)."""


@dataclass(frozen=True)
class RatePoint:
    """The searches at one target rate: its folder (relative to the curve's) and each
    option's search (one, named after the config, without options)."""

    at_rate: float
    folder: str
    found: list[CountFound]


def rate_folder(rate: float) -> str:
    """``at-4``, ``at-2.5``: the folder of one target rate's searches."""
    return f"at-{rate:g}"


def parse_rates(text: str) -> list[float]:
    """``"4,8,16"`` → ``[4.0, 8.0, 16.0]`` (one value: a one-rate search); :class:`InputError`
    at ``--at-rate`` for a non-number, a repeated rate or more than :data:`MAX_RATES`."""
    items = [item.strip() for item in text.split(",")]
    try:
        rates = [float(item) for item in items]
    except ValueError:
        raise InputError(f"expected a rate in req/s or a comma list of them (4,8,16), got "
                         f"{text!r}", field="--at-rate") from None  # fmt: skip
    if len(set(rates)) < len(rates):
        raise InputError(f"a rate is given twice in {text!r}", field="--at-rate")
    if len(rates) > MAX_RATES:
        raise InputError(f"at most {MAX_RATES} rates, got {len(rates)}", field="--at-rate")
    return rates


def find_curve(
    config: Path, sets: list[str], out: Path, opts: CountOptions, rates: list[float],
    options: FleetOptions | None, on_round: CountRoundFn | None = None,
) -> list[RatePoint]:  # fmt: skip
    """Every rate's searches (module docstring), in increasing rate; writes
    ``out/capacity.json``."""
    points = []
    for rate in sorted(rates):
        at, folder = replace(opts, at_rate=rate), rate_folder(rate)

        def round_at(name: str, counts: list[int], rate: float = rate) -> None:
            if on_round is not None:
                on_round(f"{rate:g} req/s" + (f" {name}" if name else ""), counts)

        if options is None:
            found = [find_min_count(config, sets, out / folder, at, round_at)]
        else:
            found = find_cheapest(config, sets, out / folder, at, options, round_at)
        points.append(RatePoint(rate, folder, found))
    write_json(out / CAPACITY_FILE, curve_answer(config, sets, opts, points, options))
    return points


def _row(row: OptionRow, outcome: str, priced: bool) -> dict[str, Any]:
    return {"name": row.name, "outcome": outcome, "replicas": row.replicas, "gpus": row.gpus,
            "tensor_parallel": row.tensor_parallel,
            "cost_per_hour": row.cost_per_hour if priced else None}  # fmt: skip


def curve_answer(
    config: Path, sets: list[str], opts: CountOptions, points: list[RatePoint],
    options: FleetOptions | None,
) -> dict[str, Any]:  # fmt: skip
    """capacity.json of a curve: per rate, each option's answer and the cheapest."""
    failed = any(f.failure is not None for p in points for f in p.found)
    return {
        "search": "curve", "config": str(config), "set": sets,
        "rates": [p.at_rate for p in points], "count_min": opts.count_min,
        "count_max": opts.count_max, "outcome": "failed" if failed else "found",
        "currency": None if options is None else options.currency,
        "options": None if options is None else [o.name for o in options.options],
        "simulations": sum(len(f.search.judged) for p in points for f in p.found),
        "points": [{
            "at_rate": p.at_rate, "folder": p.folder,
            "cheapest": _cheapest(p) if options is not None else None,
            "rows": [_row(f.row, f.search.outcome, options is not None) for f in p.found],
        } for p in points],
    }  # fmt: skip


def _cheapest(point: RatePoint) -> str | None:
    best, _ = compared(point.found)
    return None if best is None else best.name
