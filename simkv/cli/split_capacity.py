"""``simkv capacity CONFIG --gpus N``: the prefill:decode split of N GPUs with the most
goodput per GPU, beside the colocated fleet (the searches are :mod:`simkv.capacity.splits`)."""

from __future__ import annotations

from pathlib import Path

import typer

from simkv.capacity.run import CapacityOptions
from simkv.cli.common import (
    input_errors,
    interrupted_search,
    kept_aside,
    rate_rounds,
    shown_failure,
)


def split_capacity(
    ctx: typer.Context, config: Path, sets: list[str], opts: CapacityOptions, budget: int,
    out: Path | None, force: bool = False,
) -> None:  # fmt: skip
    """Run every split's rate search, write the folder and each split's report, print."""
    from simkv.capacity.run import check_min_good
    from simkv.capacity.search import expected_simulations
    from simkv.capacity.splits import best, find_splits, plan_splits
    from simkv.outputs import Kind, new_output
    from simkv.progress import stderr_rounds
    from simkv.report.sweep_report import write_sweep_report
    from simkv.run import load_config

    with input_errors(ctx):
        check_min_good(opts.min_good_fraction)
        name = load_config(config, sets).name
        planned = plan_splits(config, sets, budget)
        out_dir = out or Path("reports") / f"{name}-splits"
        each = expected_simulations(opts.rate_min, opts.rate_max, opts.tolerance, opts.per_round)
        try:
            with (
                new_output(out_dir, Kind.CAPACITY, force=force) as staging,
                stderr_rounds(f"splits {name}", each * len(planned)) as step,
            ):
                results = find_splits(
                    config, sets, staging.path, opts, planned, budget, rate_rounds(step)
                )
                for result in results:
                    write_sweep_report(staging.path / result.split.name)
                failed = [r for r in results if r.found.failure is not None]
                staging.keep = staging.earlier and bool(failed)
        except KeyboardInterrupt:
            typer.echo(interrupted_search(out_dir), err=True)
            raise typer.Exit(code=130) from None
    typer.echo(f"{'split':<14} {'prefill':>7} {'decode':>6} {'GPUs':>5} {'req/s':>8} "
               f"{'req/s/GPU':>9}")  # fmt: skip
    for r in results:
        floor = "≥" if r.found.search.outcome == "all_meet" else ""  # (raise --rate-max)
        rate = "—" if r.rate is None else f"{floor}{r.rate:.3g}"
        per_gpu = "—" if r.goodput_per_gpu is None else f"{r.goodput_per_gpu:.3g}"
        typer.echo(f"{r.split.name:<14} {r.split.prefill:>7} {r.split.decode:>6} "
                   f"{r.split.gpus:>5} {rate:>8} {per_gpu:>9}")  # fmt: skip
    for r in failed:
        failure = shown_failure(r.found.failure, staging, out_dir)
        if failure is not None:
            typer.echo(f"split {r.split.name}: {failure.sentence()}")
    top = best(results)
    if top is None:
        typer.echo("answer: none: no split meets the SLOs at --rate-min")
    else:
        kind = "colocated" if top.split.prefill == 0 else (
            f"{top.split.prefill} prefill + {top.split.decode} decode replicas")  # fmt: skip
        typer.echo(
            f"answer: {top.split.name} ({kind}): {top.rate:.3g} req/s within the SLOs on "
            f"{top.split.gpus} GPUs, {top.goodput_per_gpu:.3g} req/s per GPU"
        )
        if any(r.found.search.outcome == "all_meet" for r in results):
            typer.echo("(≥: every rate up to --rate-max met the SLOs; raise it to rank those)")
    if staging.keep:
        typer.echo(kept_aside(out_dir, "search", "the same command"), err=True)
    else:
        typer.echo(f"wrote {out_dir / 'splits.json'}")
    if failed:
        raise typer.Exit(code=1)
