"""The summary lines of a capacity search's sweep report (``simkv capacity``): the highest
rate meeting the SLOs, the fewest replicas at a target rate, and the fleets compared among
priced options, read from the folder's ``capacity.json`` (and its parent's, for an option)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simkv.config.fleet_options import DEFAULT_CURRENCY
from simkv.errors import InputError
from simkv.report.conventions import format_ms, money
from simkv.text import parse_json, read_text


def capacity_lines(sweep_dir: Path) -> list[str]:
    """The answer of a capacity search (``simkv capacity``) whose folder this is, else none;
    an option's search (``--options``) first states the comparison in the parent folder."""
    found = _read_json(sweep_dir / "capacity.json")
    if found is None:
        return []
    parent = _read_json(sweep_dir.parent / "capacity.json") or {}
    try:
        failed = failure_line(found, "Capacity" if found.get("search") == "rate" else "Replicas")
        if found.get("search") == "replicas":
            if parent.get("search") != "fleets":
                return [failed or replica_line(found)]
            own = f"This option, {sweep_dir.name}: " + (failed or replica_line(found))
            return [*fleet_lines(parent), own]
        if failed:
            return [failed]
        outcome, axis, rate = found["outcome"], found["axis"], found["answer_rate"]
        count, tolerance, bracket = found["simulations"], found["tolerance"], found["bracket"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []
    searched = f"{count} simulations, tolerance {100 * tolerance:g} %"
    if outcome == "found" and bracket:
        return [f"Capacity: the highest {axis} meeting the SLOs is {rate:g} req/s "
                f"({bracket[1]:g} req/s does not; {searched})."]  # fmt: skip
    if outcome == "all_meet":
        return [f"Capacity: every {axis} searched meets the SLOs, up to {rate:g} req/s "
                f"({searched})."]  # fmt: skip
    return [f"Capacity: no {axis} searched meets the SLOs ({searched})."]


def failure_line(found: dict[str, Any], head: str) -> str | None:
    """The search's first failed run (capacity.json's ``failure``), else None: a search with a
    failed run has no answer."""
    failure = found.get("failure")
    if not failure:
        return None
    return (f"{head}: no answer: the run at {failure['axis']}={failure['value']:g} failed "
            f"({failure['run']}): {failure['error']}")  # fmt: skip


def capacity_json(sweep_dir: Path) -> dict[str, Any] | None:
    """The folder's ``capacity.json`` (a capacity or count search), else None."""
    return _read_json(sweep_dir / "capacity.json")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = parse_json(read_text(path), path)
    except InputError:
        return None
    return data if isinstance(data, dict) else None


def replica_line(found: dict[str, Any]) -> str:
    """The answer of a replica-count search (``simkv capacity --at-rate``)."""
    rate, count = found["at_rate"], found["simulations"]
    answer, outcome = found["answer_replicas"], found["outcome"]
    searched = f"{count} simulations, {found['count_min']} to {found['count_max']} replicas"
    if outcome == "none_meets":
        return f"Replicas: no count searched meets the SLOs at {rate:g} req/s ({searched})."
    gpus = f", {found['answer_gpus']} GPUs" if found["tensor_parallel"] > 1 else ""
    if outcome == "all_meet":
        return (f"Replicas: every count searched meets the SLOs at {rate:g} req/s, from "
                f"{answer}{gpus} ({searched}).")  # fmt: skip
    return (f"Replicas: the fewest meeting the SLOs at {rate:g} req/s are {answer}{gpus} "
            f"({found['bracket'][0]} miss them; {searched}).")  # fmt: skip


def fleet_lines(fleets: dict[str, Any]) -> list[str]:
    """The options compared by ``simkv capacity --options``: the cheapest, then one line per
    option (replicas, GPUs, cost per hour, p99s, cost per million output tokens; the Pareto
    front marked); every cost in the fleets' ``currency``."""
    failure = fleets.get("failure")
    cheapest = fleets["cheapest"] or "none"
    if failure:
        cheapest = f"none: option {failure['option']} failed, so none is named"
    rows = {row["name"]: row for row in fleets["options"]}
    currency = fleets.get("currency", DEFAULT_CURRENCY)  # files before currency: the prices'
    if not failure and fleets["cheapest"] in rows:
        row = rows[fleets["cheapest"]]
        cheapest += (f", {_count(row['replicas'], 'replica')} × TP{row['tensor_parallel']} "
                     f"= {_count(row['gpus'], 'GPU')}, {money(row['cost_per_hour'], currency)} "
                     "per hour")  # fmt: skip
    lines = [
        f"Cheapest fleet meeting the SLOs at {fleets['at_rate']:g} req/s: {cheapest} "
        f"({fleets['simulations']} simulations over {len(fleets['options'])} options)."
    ]
    for row in fleets["options"]:
        if row["outcome"] == "failed":
            lines.append(f"Option {row['name']}: a run failed, no answer.")
            continue
        if row["replicas"] is None:
            lines.append(f"Option {row['name']}: no count searched meets the SLOs.")
            continue
        front = "; on the Pareto front" if row["pareto"] else ""
        lines.append(
            f"Option {row['name']}: {_count(row['replicas'], 'replica')} × "
            f"TP{row['tensor_parallel']} = {_count(row['gpus'], 'GPU')}, "
            f"{money(row['cost_per_hour'], currency)} per hour, "
            f"{_rate(row['request_throughput'])}, p99 TTFT "
            f"{format_ms(row['p99_ttft_ms'])}, p99 TPOT {format_ms(row['p99_tpot_ms'])}, "
            f"{money(row.get('cost_per_m_output_tokens'), currency)} per million output "
            f"tokens{front}."
        )
    return lines


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g} req/s"


def _count(n: int, noun: str) -> str:
    """``1 replica``, ``3 replicas``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")
