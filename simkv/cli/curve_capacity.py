"""``simkv capacity --at-rate 4,8,16 [--options FILE]``: the GPUs needed against target rate
(printing only; the searches are :mod:`simkv.capacity.curve`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from simkv.capacity.curve import RatePoint
from simkv.capacity.replicas import CountOptions
from simkv.cli.common import input_errors, interrupted_search, kept_aside, shown_failure
from simkv.cli.fleet_capacity import count_answer, count_rounds


def curve_capacity(
    ctx: typer.Context, config: Path, sets: list[str], opts: CountOptions, rates: list[float],
    options_file: Path | None, out: Path | None, force: bool = False,
) -> None:  # fmt: skip
    """Run every rate's searches, write the folder, its pages and reports, print."""
    from simkv.capacity.count import expected_count_simulations
    from simkv.capacity.curve import find_curve
    from simkv.capacity.replicas import check_options, count_sets
    from simkv.capacity.run import check_min_good
    from simkv.config.fleet_options import load_fleet_options
    from simkv.errors import InputError
    from simkv.outputs import Kind, new_output
    from simkv.progress import stderr_rounds
    from simkv.report.curve_report import write_curve_report
    from simkv.run import load_config

    with input_errors(ctx):
        check_min_good(opts.min_good_fraction)
        for rate in rates:
            if not 0 < rate <= 1e9:
                raise InputError(f"expected rates > 0 req/s, got {rate:g}", field="--at-rate")
        options = None if options_file is None else load_fleet_options(options_file)
        name = load_config(config, sets).name
        for rate in rates:  # bad input before any run
            if options is not None and options_file is not None:
                check_options(config, sets, rate, options, options_file)
            count_sets(config, sets, rate)
        suffix = "fleets" if options else "replicas"
        out_dir = out or Path("reports") / f"{name}-{suffix}-curve"  # beside one rate's
        each = expected_count_simulations(opts.count_min, opts.count_max, opts.per_round)
        total = each * len(rates) * (len(options.options) if options else 1)
        try:
            with (
                new_output(out_dir, Kind.CAPACITY, force=force) as staging,
                stderr_rounds(f"{suffix} {name}", total) as step,
            ):
                work = staging.path
                points = find_curve(config, sets, work, opts, rates, options, count_rounds(step))
                pages = [out_dir / p.relative_to(work) for p in write_curve_report(work)]
                failed = any(f.failure is not None for p in points for f in p.found)
                staging.keep = staging.earlier and failed
        except KeyboardInterrupt:
            typer.echo(interrupted_search(out_dir), err=True)
            raise typer.Exit(code=130) from None
    points = [replace(p, found=[replace(f, failure=shown_failure(f.failure, staging, out_dir))
                                for f in p.found]) for p in points]  # fmt: skip
    _print_curve(points, opts, options is not None, out_dir, [] if staging.keep else pages)
    if staging.keep:
        typer.echo(kept_aside(out_dir, "search", "the same command"), err=True)
    if any(f.failure is not None for p in points for f in p.found):
        raise typer.Exit(code=1)


def _print_curve(
    points: list[RatePoint], opts: CountOptions, priced: bool, out_dir: Path, pages: list[Path]
) -> None:
    """The simulations run, one row per rate and option (replicas, GPUs, cost per hour), one
    answer per rate, the pages written."""
    from simkv.capacity.replicas import compared, first_option_failure
    from simkv.cli.options_table import cheapest_sentence
    from simkv.report.conventions import money, money_unit

    found = [f for p in points for f in p.found]
    typer.echo(
        f"{sum(len(f.search.judged) for f in found)} simulations in "
        f"{sum(f.search.rounds for f in found)} rounds ({sum(f.simulated for f in found)} run "
        f"now, {sum(f.reused for f in found)} reused from {out_dir})"
    )
    width = max([13, *(len(f.row.name) for f in found)])
    unit = f"{money_unit(found[0].row.currency)}/h" if priced else ""
    typer.echo(f"{'req/s':>7}  {'option':<{width}} {'replicas':>8} {'GPUs':>5} {unit:>10}".rstrip())
    for point in points:
        for f in point.found:
            row = f.row
            cost = money(row.cost_per_hour, row.currency) if priced else ""
            cells = ("—", "—", "—" if priced else "") if row.replicas is None else (
                str(row.replicas), str(row.gpus), cost)  # fmt: skip
            typer.echo(f"{point.at_rate:>7g}  {row.name:<{width}} {cells[0]:>8} {cells[1]:>5} "
                       f"{cells[2]:>10}".rstrip())  # fmt: skip
    for point in points:
        at = replace(opts, at_rate=point.at_rate)
        if not priced:
            typer.echo("answer: " + count_answer(point.found[0], at))
            continue
        failed = first_option_failure(point.found)
        best, _ = compared(point.found)
        if failed is not None and failed.failure is not None:
            sentence = f"none: option {failed.row.name}: {failed.failure.sentence()}"
        else:
            sentence = "none meets" if best is None else cheapest_sentence(best, point.at_rate)
        typer.echo("answer: " + sentence)
    if pages:
        typer.echo(f"wrote {out_dir / 'capacity.json'}")
    for page in pages:
        typer.echo(f"wrote {page}")
