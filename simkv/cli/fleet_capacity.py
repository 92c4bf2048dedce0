"""``simkv capacity --at-rate R [--options FILE]``: the fewest replicas meeting the SLOs at a
target rate, and the cheapest fleet among priced options (printing only; the searches are
:mod:`simkv.capacity.replicas`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import typer

from simkv.capacity.replicas import COUNT_AXIS, CountFound, CountOptions
from simkv.cli.common import (
    input_errors,
    interrupted_search,
    kept_aside,
    print_at_answer,
    shown_failure,
)


def fleet_capacity(
    ctx: typer.Context, config: Path, sets: list[str], opts: CountOptions,
    options_file: Path | None, out: Path | None, force: bool = False,
) -> None:  # fmt: skip
    """Run the count search (or one per option), write the folder and its reports, print."""
    from simkv.capacity.count import expected_count_simulations
    from simkv.capacity.replicas import check_options, find_cheapest, find_min_count
    from simkv.capacity.run import check_min_good
    from simkv.config.fleet_options import load_fleet_options
    from simkv.outputs import Kind, new_output
    from simkv.progress import stderr_rounds
    from simkv.report.options_report import write_options_report
    from simkv.report.sweep_report import write_sweep_report
    from simkv.run import load_config

    with input_errors(ctx):
        check_min_good(opts.min_good_fraction)
        options = None if options_file is None else load_fleet_options(options_file)
        name = load_config(config, sets).name
        if options is not None and options_file is not None:
            check_options(config, sets, opts.at_rate, options, options_file)
        suffix = "fleets" if options else "replicas"
        out_dir = out or Path("reports") / f"{name}-{suffix}"
        each = expected_count_simulations(opts.count_min, opts.count_max, opts.per_round)
        total = each * (len(options.options) if options else 1)
        try:
            with (
                new_output(out_dir, Kind.CAPACITY, force=force) as staging,
                stderr_rounds(f"{suffix} {name}", total) as step,
            ):
                work, on_round = staging.path, count_rounds(step)
                if options is None:
                    found = [find_min_count(config, sets, work, opts, on_round)]
                else:
                    found = find_cheapest(config, sets, work, opts, options, on_round)
                reports = [out_dir / write_sweep_report(f.out_dir).relative_to(work)
                           for f in found]  # fmt: skip
                if options is not None:
                    reports.insert(0, out_dir / write_options_report(work).relative_to(work))
                staging.keep = staging.earlier and any(f.failure is not None for f in found)
        except KeyboardInterrupt:
            typer.echo(interrupted_search(out_dir), err=True)
            raise typer.Exit(code=130) from None
    found = [replace(f, failure=shown_failure(f.failure, staging, out_dir)) for f in found]
    _print_found(found, opts, options is not None, out_dir, [] if staging.keep else reports)
    if staging.keep:
        typer.echo(kept_aside(out_dir, "search", "the same command"), err=True)
    if any(f.failure is not None for f in found):
        raise typer.Exit(code=1)


def _print_found(
    found: list[CountFound], opts: CountOptions, compared: bool, out_dir: Path,
    reports: list[Path],
) -> None:  # fmt: skip
    """The simulations run, the answer (the options table when ``compared``), the files."""
    simulated = sum(len(f.search.judged) for f in found)
    rounds = sum(f.search.rounds for f in found)
    typer.echo(
        f"{simulated} simulations in {rounds} rounds ({sum(f.simulated for f in found)} run "
        f"now, {sum(f.reused for f in found)} reused from {out_dir})"
    )
    if compared:
        cheapest = _print_options(found, opts)
        if cheapest is not None and reports:
            answer = cheapest.search.answer or 0
            where = f"{cheapest.row.name}, {_replicas(answer)}"
            print_at_answer(out_dir / cheapest.out_dir.name, COUNT_AXIS, answer, where)
    else:
        from simkv.cli.options_table import units_line

        typer.echo("answer: " + count_answer(found[0], opts))
        answer = found[0].search.answer
        if found[0].failure is None and answer is not None and reports:
            print_at_answer(out_dir, COUNT_AXIS, answer, _replicas(answer))
            typer.echo(units_line(found[0].row))
    if reports:  # none when the search waits beside an earlier one (kept aside)
        typer.echo(f"wrote {out_dir / 'capacity.json'}")
    for report in reports:
        typer.echo(f"wrote {report}")


def _replicas(n: int) -> str:
    return f"{n} replica" + ("" if n == 1 else "s")


def count_answer(found: CountFound, opts: CountOptions) -> str:
    """The answer of one count search, as a sentence."""
    result, row = found.search, found.row
    at = f"at {opts.at_rate:g} req/s"
    if found.failure is not None:
        return f"none: {found.failure.sentence()}; the same command runs it again"
    if result.outcome == "none_meets":
        return f"none meets: even {_replicas(opts.count_max)} miss the SLOs {at}"
    gpus = f" ({row.gpus} GPUs at TP{row.tensor_parallel})" if row.tensor_parallel > 1 else ""
    if result.outcome == "all_meet" and opts.count_min > 1:
        return (f"at most {_replicas(opts.count_min)}{gpus}: every count searched meets the "
                f"SLOs {at}; lower --count-min")  # fmt: skip
    answer = result.answer or 0
    verb = "meets" if answer == 1 else "meet"
    fails = None if result.bracket is None else result.bracket.fails
    below = (
        "" if fails is None else f"; {_replicas(fails)} " + ("does not" if fails == 1 else "do not")
    )
    return f"{_replicas(answer)}{gpus} {verb} the SLOs {at}{below}"


def _print_options(found: list[CountFound], opts: CountOptions) -> CountFound | None:
    """The options' tables (:mod:`simkv.cli.options_table`), the Pareto front and the answer
    line; returns the cheapest option's search (None when none is named)."""
    from simkv.capacity.replicas import compared, first_option_failure
    from simkv.cli import options_table as ot

    rows = [f.row for f in found]
    best, front = compared(found)
    for line in [*ot.answer_table(rows), *ot.units_table(rows)]:
        typer.echo(line)
    failed = first_option_failure(found)
    if failed is not None and failed.failure is not None:
        typer.echo(f"answer: none: option {failed.row.name}: {failed.failure.sentence()}; "
                   "the same command runs it again")  # fmt: skip
        return None
    if best is None:
        typer.echo(f"answer: none meets: no option meets the SLOs at {opts.at_rate:g} req/s "
                   f"with up to {_replicas(opts.count_max)}")  # fmt: skip
        return None
    marks = ot.marks_line(rows, best, front)
    if marks:
        typer.echo(marks)
    typer.echo("answer: " + ot.cheapest_sentence(best, opts.at_rate))
    return found[rows.index(best)]


def count_rounds(step: Callable[[str, int], None]) -> Callable[[str, list[int]], None]:
    """The count searches' round callback for a progress bar's ``step``: each round's counts
    (after the option's name, when there is one), and the runs done before it."""
    done = 0

    def on_round(option: str, counts: list[int]) -> None:
        nonlocal done
        where = f"{option}: " if option else ""
        step(f"{where}simulating " + ", ".join(map(str, counts)) + " replicas", done)
        done += len(counts)

    return on_round
