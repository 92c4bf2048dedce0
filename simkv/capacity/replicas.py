"""``simkv capacity --at-rate R``: the fewest replicas meeting the SLOs at offered rate ``R``,
and with ``--options``, the cheapest fleet among priced GPU/TP options.

The replica count of a one-group fleet is the one axis (:data:`COUNT_AXIS`); a config without
``fleet:`` is one replica of its own engine, so its runs gain ``fleet.replicas=[{count: n}]``
(a one-replica fleet gives exactly the single engine's frames). A fleet of several groups is
refused: scaling one group, or all of them in proportion, changes the fleet's mix, a choice
the user makes by writing the fleet. Every run also sets the config's rate axis
(:func:`simkv.capacity.run.rate_axis`) to ``R``. Runs execute, resume and are judged as a rate
search's (:class:`simkv.capacity.run.SearchRuns`); the folder is a sweep folder over the count
axis plus ``capacity.json``.

With options (:mod:`simkv.config.fleet_options`), each option's search has its own such
folder ``<out>/<option name>/``; ``<out>/capacity.json`` holds one row per option (replicas,
GPUs, cost per hour, throughput, p99 latencies), the cheapest and the Pareto front
(:mod:`simkv.capacity.options`). A run that fails stops its option's search (outcome
``failed``, :class:`simkv.capacity.run.RunFailure`); the other options still run, but with any
option failed the comparison has no cheapest fleet and no Pareto front (the failed option
could have been either): its outcome is ``failed`` and it names the first failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simkv.capacity.count import CountResult, check_count_parameters, search_count
from simkv.capacity.options import OptionRow, cheapest, pareto, row_record
from simkv.capacity.run import (
    CAPACITY_FILE,
    RunFailure,
    RunOptions,
    SearchRuns,
    rate_axis,
    write_json,
)
from simkv.capacity.search import SearchError
from simkv.config.fleet import ENGINE_SECTIONS
from simkv.config.fleet_options import (
    DEFAULT_CURRENCY,
    FleetOption,
    FleetOptions,
    in_options_file,
)
from simkv.config.sim import SimConfig
from simkv.errors import InputError
from simkv.metrics.slo import slo_margins
from simkv.run import load_config

COUNT_AXIS = "fleet.replicas.0.count"
"""The key a count search varies: the replica count of the fleet's only group."""
PRICED_KEYS = ("price_per_gpu_hour", "cost_per_hour", "cost_per_m_output_tokens",
               "cost_per_m_total_tokens", "requests_per_cost")  # fmt: skip
"""The keys of a row's record (:func:`simkv.capacity.options.row_record`) that need a price."""
CountRoundFn = Callable[[str, list[int]], None]
"""Called before each round's runs with the option's name ("" without options) and counts."""


@dataclass(frozen=True, kw_only=True)
class CountOptions(RunOptions):
    """The replica-count search: the target rate (requests/s), the count bounds, counts per
    round."""

    at_rate: float
    count_min: int = 1
    count_max: int = 64
    per_round: int = 1


@dataclass(frozen=True)
class CountFound:
    """A finished count search: its result, the folder, the simulations it ran now, its
    row (price and GPUs per replica; price 0 without options) and its first failed run
    (None unless the outcome is ``failed``)."""

    search: CountResult
    out_dir: Path
    simulated: int
    reused: int
    row: OptionRow
    failure: RunFailure | None = None


def count_sets(config: Path, sets: list[str], at_rate: float) -> list[str]:
    """The ``--set`` items of every run of a count search over ``config`` (``sets`` first,
    then a one-group fleet where there is none, then the target rate)."""
    cfg = load_config(config, sets)
    fleet: list[str] = []
    if cfg.fleet is None:
        fleet = ["fleet.replicas=[{count: 1}]"]
    elif len(cfg.fleet.replicas) > 1:
        raise InputError(
            f"the replica-count search scales a fleet of one group; this fleet has "
            f"{len(cfg.fleet.replicas)}: give one group (its count is searched) or none",
            file=config,
            field="fleet.replicas",
        )
    return [*sets, *fleet, f"{rate_axis(cfg)}={at_rate!r}"]


def check_option(config: Path, cfg: SimConfig, option: FleetOption) -> None:
    """:class:`InputError` when an option sets a top-level engine section that the fleet's
    group replaces (the option would change nothing)."""
    if cfg.fleet is None:
        return
    group = cfg.fleet.replicas[0]
    for item in option.set:
        section = item.partition("=")[0].split(".")[0]
        if section in ENGINE_SECTIONS and getattr(group, section) is not None:
            raise InputError(
                f"option {option.name}: {item} sets the top-level {section}, which the "
                f"fleet's group replaces; set fleet.replicas.0.{section}… instead",
                file=config,
                field=f"fleet.replicas.0.{section}",
            )


def check_options(
    config: Path, sets: list[str], at_rate: float, options: FleetOptions, path: Path
) -> None:
    """Every option's items applied to ``config`` before any run; the errors of the first
    option that has any, those of its items located in the options file ``path``."""
    base = load_config(config, sets)
    for k, option in enumerate(options.options):
        try:
            check_option(config, base, option)
            count_sets(config, [*sets, *option.set], at_rate)
        except InputError as err:
            raise in_options_file(path, k, option, err) from None


def find_min_count(
    config: Path, sets: list[str], out: Path, opts: CountOptions,
    on_round: CountRoundFn | None = None, option: FleetOption | None = None,
    currency: str = DEFAULT_CURRENCY,
) -> CountFound:  # fmt: skip
    """Search the fewest replicas of ``config`` (with ``option``'s items) meeting its SLOs at
    ``opts.at_rate``; write the folder ``out``. Bad input raises :class:`InputError` before
    anything runs."""
    try:
        check_count_parameters(opts.count_min, opts.count_max, opts.per_round)
    except SearchError as err:
        raise InputError(str(err), field="--count-min/--count-max/--per-round") from None
    if not 0 < opts.at_rate <= 1e9:
        raise InputError(f"expected a rate > 0 req/s, got {opts.at_rate:g}", field="--at-rate")
    items = [*sets, *(option.set if option else [])]
    runs = SearchRuns(config, count_sets(config, items, opts.at_rate), out, opts, COUNT_AXIS)
    name = option.name if option else ""

    def judge(counts: list[int]) -> dict[int, bool]:
        if on_round is not None:
            on_round(name, counts)
        return runs.judge(counts)

    result = search_count(judge, opts.count_min, opts.count_max, per_round=opts.per_round)
    row = _row(runs, result, option, currency)
    failure = runs.first_failure(result.judged)
    runs.write(_count_answer(runs, result, opts, row, failure))
    return CountFound(result, out, runs.simulated, runs.reused, row, failure)


def _row(
    runs: SearchRuns, result: CountResult, option: FleetOption | None, currency: str
) -> OptionRow:
    """The option's row: its answer run's figures (none when no count meets)."""
    tp = runs.base.group_configs()[0].parallel.tensor_parallel
    price = option.price_per_gpu_hour if option else 0.0
    name = option.name if option else runs.config.stem
    if result.answer is None:
        return OptionRow(name, price, tp, None, currency=currency)
    summary = runs.summary(runs.planned[result.answer])
    margins = tuple(slo_margins(summary, runs.base.slo).items())
    return OptionRow(
        name, price, tp, result.answer, summary.get("request_throughput"),
        summary.get("p99_ttft_ms"), summary.get("p99_tpot_ms"), currency=currency,
        output_throughput=summary.get("output_throughput"),
        total_token_throughput=summary.get("total_token_throughput"),
        mfu_frac=summary.get("mfu_frac"), max_busy_frac=summary.get("max_busy_frac"),
        slo_margins=margins,
    )  # fmt: skip


def _count_answer(
    runs: SearchRuns, result: CountResult, opts: CountOptions, row: OptionRow,
    failure: RunFailure | None,
) -> dict[str, Any]:  # fmt: skip
    """capacity.json of a count search."""
    bracket = result.bracket
    return {
        "search": "replicas", "config": str(runs.config), "set": runs.sets, "axis": runs.axis,
        "slo": runs.base.slo.model_dump(), "min_good_fraction": opts.min_good_fraction,
        "at_rate": opts.at_rate, "count_min": opts.count_min, "count_max": opts.count_max,
        "per_round": opts.per_round, "outcome": result.outcome,
        "answer_replicas": result.answer, "tensor_parallel": row.tensor_parallel,
        "answer_gpus": row.gpus,
        "bracket": None if bracket is None else [bracket.fails, bracket.meets],
        "rounds": result.rounds, "simulations": len(result.judged),
        "failure": None if failure is None else failure.record(runs.out),
        "judged": runs.judged_rows(result.judged, "replicas"),
        "at_answer": None if row.replicas is None else unpriced(row_record(row), row),
    }  # fmt: skip


def unpriced(record: dict[str, Any], row: OptionRow) -> dict[str, Any]:
    """``record`` without its costs when ``row`` has no price (a search without options)."""
    if row.price_per_gpu_hour > 0:
        return record
    return {key: value for key, value in record.items() if key not in PRICED_KEYS}


def find_cheapest(
    config: Path, sets: list[str], out: Path, opts: CountOptions, options: FleetOptions,
    on_round: CountRoundFn | None = None,
) -> list[CountFound]:  # fmt: skip
    """Each option's count search in ``out/<name>/``, then ``out/capacity.json`` with the
    rows, the cheapest and the Pareto front (see the module docstring)."""
    base = load_config(config, sets)
    for option in options.options:
        check_option(config, base, option)
        count_sets(config, [*sets, *option.set], opts.at_rate)  # bad input before any run
    found = [find_min_count(config, sets, out / option.name, opts, on_round, option,
                            options.currency) for option in options.options]  # fmt: skip
    write_json(out / CAPACITY_FILE, fleets_answer(config, sets, opts, found))
    return found


def first_option_failure(found: list[CountFound]) -> CountFound | None:
    """The first option's search (in the file's order) that failed."""
    return next((f for f in found if f.failure is not None), None)


def compared(found: list[CountFound]) -> tuple[OptionRow | None, list[bool]]:
    """The cheapest row and the Pareto marks; neither when an option failed (its fleet could
    have been the cheapest or on the front)."""
    rows = [f.row for f in found]
    if first_option_failure(found) is not None:
        return None, [False] * len(rows)
    return cheapest(rows), pareto(rows)


def fleets_answer(
    config: Path, sets: list[str], opts: CountOptions, found: list[CountFound]
) -> dict[str, Any]:
    """capacity.json of a search among options."""
    rows = [f.row for f in found]
    (best, front), failed = compared(found), first_option_failure(found)
    outcome = "failed" if failed else "none_meets" if best is None else "found"
    return {
        "search": "fleets", "config": str(config), "set": sets, "at_rate": opts.at_rate,
        "count_min": opts.count_min, "count_max": opts.count_max, "outcome": outcome,
        "failure": None if failed is None or failed.failure is None else {
            "option": failed.row.name, **failed.failure.record(failed.out_dir.parent)},
        "cheapest": None if best is None else best.name,
        "simulations": sum(len(f.search.judged) for f in found),
        "currency": found[0].row.currency if found else DEFAULT_CURRENCY,
        "options": [{
            "name": row.name, "outcome": f.search.outcome, **row_record(row),
            "pareto": on_front, "cheapest": best is not None and row.name == best.name,
            "folder": f.out_dir.name,
        } for f, row, on_front in zip(found, rows, front, strict=True)],
    }  # fmt: skip
