"""``simkv sweep`` and ``simkv report``: many runs, and reports rebuilt from folders."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from simkv.cli.common import input_errors, output_folder
from simkv.errors import InputError
from simkv.sweep.executors import EXECUTOR_KINDS

Executor = StrEnum("Executor", {kind: kind for kind in EXECUTOR_KINDS})  # type: ignore[misc]


def sweep(
    ctx: typer.Context,
    sweep_file: Annotated[Path, typer.Argument(help="Sweep file (YAML): base config + axes.")],
    out: Annotated[
        Path | None, typer.Option(help="Output directory [default: reports/<sweep name>]")
    ] = None,
    executor: Annotated[
        Executor, typer.Option(help="Where runs execute; ray needs pip install -e '.[ray]'.")
    ] = Executor.serial,
    jobs: Annotated[int | None, typer.Option(help="Parallel runs [default: CPUs].")] = None,
    resume: Annotated[
        bool, typer.Option(help="Skip runs whose outputs are complete for the same config.")
    ] = False,
    ray_address: Annotated[
        str | None, typer.Option(help="Join this Ray cluster instead of starting a local one.")
    ] = None,
    run_timeout: Annotated[
        float | None,
        typer.Option(help="Wall-clock limit per run, s; a run past it fails (timeout).", min=0),
    ] = None,
) -> None:
    """Run every point of a sweep; write runs/<id>/, sweep.parquet and report.html."""
    from simkv.progress import stderr_progress
    from simkv.report.sweep_report import write_sweep_report
    from simkv.sweep.run import first_failure, run_sweep

    try:
        with input_errors(ctx):
            if out is not None:
                output_folder(out)
            with stderr_progress(f"sweep {sweep_file.name}") as progress:
                result = run_sweep(
                    sweep_file,
                    out,
                    executor=executor.value,
                    jobs=jobs,
                    resume=resume,
                    ray_address=ray_address,
                    progress=progress,
                    run_timeout_s=run_timeout or None,
                )
    except KeyboardInterrupt:
        typer.echo(
            "interrupted: the runs in progress were stopped (their folders stay incomplete); "
            f"finished runs are kept. Continue with: simkv sweep {sweep_file} --resume"
            + (f" --out {out}" if out is not None else ""),
            err=True,
        )
        raise typer.Exit(code=130) from None
    with input_errors(ctx):
        report = write_sweep_report(result.out_dir)
    typer.echo(
        f"{result.ran} runs ran, {result.skipped} skipped (complete), {result.failed} failed "
        f"in {result.wall_s:.1f} s ({executor.value})"
    )
    failure = first_failure(result.table)
    if failure is not None:
        run_dir = result.out_dir / "runs" / failure[0]
        typer.echo(f"first failure: {failure[1]} ({run_dir / 'error.txt'})")
    typer.echo(f"wrote {result.out_dir / 'sweep.parquet'}")
    typer.echo(f"wrote {report}")
    if result.failed:
        raise typer.Exit(code=1)


def report(
    ctx: typer.Context,
    run_dirs: Annotated[list[Path], typer.Argument(help="Run or sweep folders.")],
    out: Annotated[
        Path | None, typer.Option(help="Comparison report file [default: reports/compare.html]")
    ] = None,
) -> None:
    """Rebuild the report of a run (or sweep) folder, or compare several runs in one report."""
    from simkv.report.run_report import render_comparison_report, write_run_report
    from simkv.report.sweep_report import write_sweep_report

    with input_errors(ctx):
        for run_dir in run_dirs:
            if not run_dir.is_dir():
                raise InputError("not a run or sweep folder", file=run_dir)
        if len(run_dirs) > 1:
            target = out or Path("reports") / "compare.html"
            if target.is_dir() or (target.exists() and not target.is_file()):
                raise InputError("output is not a regular file", file=target)
            output_folder(target.parent)
            target.write_text(render_comparison_report(run_dirs), encoding="utf-8")
            written = [target]
        else:
            one = run_dirs[0]
            sweep_dir = (one / "sweep.parquet").is_file()
            written = [write_sweep_report(one) if sweep_dir else write_run_report(one)]
    for path in written:
        typer.echo(f"wrote {path}")
