"""``simkv capacity CONFIG --gpus N`` (or ``--budget-per-hour B --price-per-gpu-hour P``, with
``--tp-prefill``/``--tp-decode`` lists): the prefill:decode split of the budget with the most
goodput per GPU (per cost with a money budget), beside the colocated fleets (the plan is
:mod:`simkv.capacity.split_plan`, the searches :mod:`simkv.capacity.splits`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from simkv.capacity.run import CapacityOptions
from simkv.cli.common import (
    input_errors,
    interrupted_search,
    kept_aside,
    rate_rounds,
    shown_failure,
)

if TYPE_CHECKING:
    from simkv.capacity.split_plan import Budget, Split
    from simkv.capacity.splits import SplitResult
    from simkv.outputs import Staging


def split_budget(
    gpus: int | None, per_hour: float | None, prices: str | None, tp_prefill: str | None,
    tp_decode: str | None,
) -> Budget:  # fmt: skip
    """The budget of the command line's split options (:class:`InputError` when bad)."""
    from simkv.capacity.split_plan import Budget, check_budget, parse_prices, parse_tp_list

    budget = Budget(gpus, per_hour, parse_prices(prices), parse_tp_list(tp_prefill, "--tp-prefill"),
                    parse_tp_list(tp_decode, "--tp-decode"))  # fmt: skip
    check_budget(budget)
    return budget


def split_capacity(
    ctx: typer.Context, config: Path, sets: list[str], opts: CapacityOptions, budget: Budget,
    out: Path | None, force: bool = False,
) -> None:  # fmt: skip
    """Print the plan, run every split's rate search, write the folder, each split's report and
    splits.html, print the table and the answer."""
    from simkv.capacity.run import check_min_good
    from simkv.capacity.search import expected_simulations
    from simkv.capacity.splits import find_splits, plan_splits
    from simkv.outputs import Kind, new_output
    from simkv.progress import stderr_rounds
    from simkv.report.splits_report import write_splits_report
    from simkv.report.sweep_report import write_sweep_report
    from simkv.run import load_config
    from simkv.sweep.executors import ray_held

    with input_errors(ctx):
        check_min_good(opts.min_good_fraction)
        name = load_config(config, sets).name
        planned = plan_splits(config, sets, budget)
        out_dir = out or Path("reports") / f"{name}-splits"
        each = expected_simulations(opts.rate_min, opts.rate_max, opts.tolerance, opts.per_round)
        try:
            with (
                ray_held(opts.executor, jobs=opts.jobs, ray_address=opts.ray_address),
                new_output(out_dir, Kind.CAPACITY, force=force) as staging,
                stderr_rounds(f"splits {name}", each * len(planned)) as step,
            ):
                _print_plan(planned, each)
                results = find_splits(
                    config, sets, staging.path, opts, planned, budget, rate_rounds(step)
                )
                for result in results:
                    write_sweep_report(staging.path / result.split.name)
                write_splits_report(staging.path)
                failed = [r for r in results if r.found.failure is not None]
                staging.keep = staging.earlier and bool(failed)
        except KeyboardInterrupt:
            typer.echo(interrupted_search(out_dir), err=True)
            raise typer.Exit(code=130) from None
    _print_results(results, budget)
    _print_end(failed, staging, out_dir)


def _print_end(failed: list[SplitResult], staging: Staging, out_dir: Path) -> None:
    """Each failed split's first failure, then the files written (or the folder kept aside);
    exit 1 when a split failed."""
    for r in failed:
        failure = shown_failure(r.found.failure, staging, out_dir)
        if failure is not None:
            typer.echo(f"split {r.split.name}: {failure.sentence()}")
    if staging.keep:
        typer.echo(kept_aside(out_dir, "search", "the same command"), err=True)
    else:
        typer.echo(f"wrote {out_dir / 'splits.json'}")
        typer.echo(f"wrote {out_dir / 'splits.html'}")
    if failed:
        raise typer.Exit(code=1)


def _print_plan(planned: list[Split], each: int) -> None:
    """The plan, before any run: how many splits, which, and the simulations at most."""
    names = ", ".join(split.name for split in planned)
    typer.echo(f"plan: {len(planned)} splits ({names}); up to {each} simulations each, "
               f"{each * len(planned)} in all")  # fmt: skip


def _print_results(results: list[SplitResult], budget: Budget) -> None:
    """The table (req/s, per GPU and, with prices, cost and per cost) and the answer line."""
    from simkv.capacity.splits import best, over_colocated

    priced = budget.prices is not None
    by_cost = budget.per_hour is not None
    head = f"{'split':<18} {'prefill':>7} {'decode':>6} {'GPUs':>5} {'req/s':>8} {'req/s/GPU':>9}"
    typer.echo(head + (f" {'$/h':>9} {'req/s/$/h':>9}" if priced else ""))
    for r in results:
        floor = "≥" if r.found.search.outcome == "all_meet" else ""  # (raise --rate-max)
        sides = (f"{r.split.prefill}×tp{r.split.tp_prefill}" if r.split.prefill else "—",
                 f"{r.split.decode}×tp{r.split.tp_decode}")  # fmt: skip
        line = (f"{r.split.name:<18} {sides[0]:>7} {sides[1]:>6} {r.split.gpus:>5} "
                f"{_num(r.rate, floor):>8} {_num(r.goodput_per_gpu):>9}")  # fmt: skip
        if priced:
            line += f" {r.split.cost_per_hour or 0:>9.2f} {_num(r.goodput_per_cost):>9}"
        typer.echo(line)
    top = best(results, by_cost)
    if top is None:
        typer.echo("answer: none: no split meets the SLOs at --rate-min")
        return
    kind = "colocated" if top.split.prefill == 0 else (
        f"{top.split.prefill} prefill + {top.split.decode} decode replicas")  # fmt: skip
    cost = "" if top.goodput_per_cost is None else f", {top.goodput_per_cost:.3g} req/s per $/h"
    factor = over_colocated(results, by_cost)
    than = "" if factor is None else f"; {factor:.2f}× the best colocated fleet"
    typer.echo(f"answer: {top.split.name} ({kind}): {top.rate:.3g} req/s within the SLOs on "
               f"{top.split.gpus} GPUs, {top.goodput_per_gpu:.3g} req/s per GPU"
               f"{cost}{than}")  # fmt: skip
    if any(r.found.search.outcome == "all_meet" for r in results):
        typer.echo("(≥: every rate up to --rate-max met the SLOs; raise it to rank those)")


def _num(value: float | None, prefix: str = "") -> str:
    return "—" if value is None else f"{prefix}{value:.3g}"
