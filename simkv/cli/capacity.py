"""``simkv capacity``: the highest offered rate a config sustains within its SLOs, or with
``--at-rate`` the fewest replicas (and with ``--options`` the cheapest fleet) meeting them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from simkv.cli.common import (
    ForceOption,
    SetOption,
    input_errors,
    interrupted_search,
    kept_aside,
    print_at_answer,
    rate_rounds,
    shown_failure,
)
from simkv.cli.sweeps import Executor


def capacity(
    ctx: typer.Context,
    config: Annotated[Path, typer.Argument(help="Run config (YAML) with an slo: section.")],
    set_: SetOption = None,
    rate_min: Annotated[
        float, typer.Option(help="Lowest offered rate searched, requests/s.")
    ] = 0.25,
    rate_max: Annotated[
        float, typer.Option(help="Highest offered rate searched, requests/s.")
    ] = 32.0,
    tolerance: Annotated[
        float, typer.Option(help="Stop when the bracket's ends are within this ratio - 1.")
    ] = 0.02,
    per_round: Annotated[
        int,
        typer.Option(help="Rates (or counts) simulated per round, run at once; 1..64."),
    ] = 3,
    min_good: Annotated[
        float | None,
        typer.Option(help="Also require this share (0-1) of requests to meet every SLO."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Output directory [default: reports/<run name>-capacity]")
    ] = None,
    executor: Annotated[
        Executor, typer.Option(help="Where runs execute; ray needs pip install -e '.[ray]'.")
    ] = Executor.serial,
    jobs: Annotated[int | None, typer.Option(help="Parallel runs, 1..256 [default: CPUs].")] = None,
    ray_address: Annotated[
        str | None, typer.Option(help="Join this Ray cluster instead of starting a local one.")
    ] = None,
    run_timeout: Annotated[
        float | None,
        typer.Option(help="Wall-clock limit per run, s; a run past it fails the search.", min=0),
    ] = None,
    at_rate: Annotated[
        str | None,
        typer.Option(
            help="Instead: the fewest replicas meeting the SLOs at this rate, req/s "
            "(a comma list, 4,8,16: GPUs against target rate)."
        ),
    ] = None,
    count_min: Annotated[int, typer.Option(help="Fewest replicas searched (--at-rate).")] = 1,
    count_max: Annotated[int, typer.Option(help="Most replicas searched (--at-rate).")] = 64,
    options: Annotated[
        Path | None,
        typer.Option(help="YAML of priced GPU/TP options: the cheapest fleet (--at-rate)."),
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option(
            help="Instead: the prefill:decode split of this many GPUs (a config with "
            "prefill and decode groups) with the most goodput per GPU, and colocated."
        ),
    ] = None,
    budget_per_hour: Annotated[
        float | None,
        typer.Option(
            help="Instead, or with --gpus: the splits whose GPUs cost at most this per hour "
            "(at --price-per-gpu-hour), ranked by goodput per cost."
        ),
    ] = None,
    price_per_gpu_hour: Annotated[
        str | None,
        typer.Option(
            help="Your price of a GPU-hour (USD), or prefill,decode prices: per-cost "
            "goodput of the splits."
        ),
    ] = None,
    tp_prefill: Annotated[
        str | None, typer.Option(help="TP degrees the split search tries for prefill: 1,2.")
    ] = None,
    tp_decode: Annotated[
        str | None, typer.Option(help="TP degrees the split search tries for decode: 1,2.")
    ] = None,
    force: ForceOption = False,
) -> None:
    """Find the highest offered rate meeting the config's SLOs (p99 of each set objective);
    with --at-rate, the fewest replicas meeting them at that rate; with --options too, the
    cheapest fleet among the options; with --gpus or --budget-per-hour, the best
    prefill:decode split."""
    from simkv.capacity.run import CapacityOptions, check_min_good, find_capacity
    from simkv.capacity.search import expected_simulations
    from simkv.outputs import Kind, new_output
    from simkv.progress import stderr_rounds
    from simkv.report.sweep_report import write_sweep_report
    from simkv.run import load_config

    with input_errors(ctx):
        _check_mode(ctx, at_rate is not None)
        _check_per_round(per_round)
    runs: dict[str, Any] = {
        "min_good_fraction": min_good, "executor": executor.value, "jobs": jobs,
        "ray_address": ray_address, "run_timeout_s": run_timeout or None,
    }  # fmt: skip
    if at_rate is not None:
        from simkv.capacity.curve import parse_rates
        from simkv.capacity.replicas import CountOptions
        from simkv.cli.fleet_capacity import fleet_capacity

        with input_errors(ctx):
            rates = parse_rates(at_rate)
        counts = CountOptions(
            at_rate=rates[0],
            count_min=count_min,
            count_max=count_max,
            per_round=per_round,
            **runs,
        )
        if len(rates) == 1:
            fleet_capacity(ctx, config, set_ or [], counts, options, out, force)
        else:
            from simkv.cli.curve_capacity import curve_capacity

            curve_capacity(ctx, config, set_ or [], counts, rates, options, out, force)
        return
    opts = CapacityOptions(
        rate_min=rate_min, rate_max=rate_max, tolerance=tolerance, per_round=per_round, **runs
    )
    split = (gpus, budget_per_hour, price_per_gpu_hour, tp_prefill, tp_decode)
    if any(value is not None for value in split):
        from simkv.cli.split_capacity import split_budget, split_capacity

        with input_errors(ctx):
            budget = split_budget(*split)
        split_capacity(ctx, config, set_ or [], opts, budget, out, force)
        return
    with input_errors(ctx):
        check_min_good(min_good)
        name = load_config(config, set_ or []).name
        out_dir = out or Path("reports") / f"{name}-capacity"
        total = expected_simulations(rate_min, rate_max, tolerance, per_round)
        try:
            with (
                new_output(out_dir, Kind.CAPACITY, force=force) as staging,
                stderr_rounds(f"capacity {name}", total) as step,
            ):
                found = find_capacity(config, set_ or [], staging.path, opts, rate_rounds(step))
                write_sweep_report(staging.path)
                staging.keep = found.failure is not None and staging.earlier
        except KeyboardInterrupt:
            typer.echo(interrupted_search(out_dir), err=True)
            raise typer.Exit(code=130) from None
        report = out_dir / "report.html"
    failure = shown_failure(found.failure, staging, out_dir)
    result = found.search
    typer.echo(
        f"{len(result.judged)} simulations in {result.rounds} rounds "
        f"({found.simulated} run now, {found.reused} reused from {out_dir})"
    )
    axis = found.axis
    if failure is not None:
        typer.echo(f"answer: none: {failure.sentence()}; the same command runs it again")
    elif result.outcome == "none_meets":
        typer.echo(f"answer: none meets: even {axis}={result.judged[0][0]:g} misses the SLOs")
    elif result.outcome == "all_meet":
        typer.echo(
            f"answer: at least {result.answer:g} req/s: every rate up to --rate-max meets the "
            "SLOs; raise --rate-max to find the limit"
        )
    else:
        above = "" if result.bracket is None else f"; {result.bracket.fails:g} req/s does not"
        typer.echo(f"answer: {axis}={result.answer:g} req/s meets the SLOs{above}")
    if failure is None and result.answer is not None and not staging.keep:
        print_at_answer(out_dir, axis, result.answer, f"{result.answer:g} req/s")
    if staging.keep:
        typer.echo(kept_aside(out_dir, "search", "the same command"), err=True)
    else:
        typer.echo(f"wrote {out_dir / 'capacity.json'}")
        typer.echo(f"wrote {report}")
    if failure is not None:
        raise typer.Exit(code=1)


RATE_ONLY = ("rate_min", "rate_max", "tolerance")
"""Options of the rate search alone."""
COUNT_ONLY = ("count_min", "count_max", "options")
"""Options of the replica-count search (``--at-rate``) alone."""
SPLIT_ONLY = ("gpus", "budget_per_hour", "price_per_gpu_hour", "tp_prefill", "tp_decode")
"""Options of the prefill:decode split search alone (never with ``--at-rate``)."""


def _check_mode(ctx: typer.Context, counting: bool) -> None:
    """:class:`InputError` for an option given on the command line that the chosen search
    would ignore (a rate bound with ``--at-rate``, a count bound or options without it)."""
    from simkv.errors import InputError

    for name in COUNT_ONLY if not counting else (*RATE_ONLY, *SPLIT_ONLY):
        source = ctx.get_parameter_source(name)  # typer's click, compared by name
        if source is not None and source.name == "COMMANDLINE":
            flag = "--" + name.replace("_", "-")
            need = ("searches rates, not replica counts: drop it with --at-rate" if counting
                    else "belongs to the replica-count search: give --at-rate too")  # fmt: skip
            raise InputError(need, field=flag)


def _check_per_round(per_round: int) -> None:
    """:class:`InputError` at ``--per-round`` outside 1..:data:`MAX_PER_ROUND`."""
    from simkv.capacity.search import SearchError, check_per_round
    from simkv.errors import InputError

    try:
        check_per_round(per_round)
    except SearchError as err:
        raise InputError(str(err), field="--per-round") from None
