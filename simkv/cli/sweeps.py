"""``simkv sweep`` and ``simkv report``: many runs, and reports rebuilt from folders."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from simkv.cli.common import ForceOption, input_errors, kept_aside, simkv_page
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
    jobs: Annotated[int | None, typer.Option(help="Parallel runs, 1..256 [default: CPUs].")] = None,
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
    force: ForceOption = False,
) -> None:
    """Run every point of a sweep; write runs/<id>/, sweep.parquet and report.html."""
    from simkv.outputs import Kind, new_output
    from simkv.progress import stderr_progress
    from simkv.report.sweep_report import write_sweep_report
    from simkv.sweep.run import default_out_dir, first_failure, run_sweep
    from simkv.sweep.spec import load_sweep

    out_dir = out or Path("reports") / sweep_file.stem  # until the sweep's name is read
    try:
        with input_errors(ctx):
            out_dir = out or default_out_dir(load_sweep(sweep_file))
            with (
                new_output(out_dir, Kind.SWEEP, force=force) as staging,
                stderr_progress(f"sweep {sweep_file.name}") as progress,
            ):
                result = run_sweep(
                    sweep_file,
                    staging.path,
                    executor=executor.value,
                    jobs=jobs,
                    resume=resume,
                    ray_address=ray_address,
                    progress=progress,
                    run_timeout_s=run_timeout or None,
                )
                write_sweep_report(staging.path)
                staging.keep = bool(result.failed) and staging.earlier
    except KeyboardInterrupt:
        typer.echo(
            f"interrupted: {out_dir} is as it was; the runs in progress were stopped and the "
            f"finished ones are kept beside it (in .{out_dir.name}.partial). Continue with: "
            f"simkv sweep {sweep_file} --resume" + (f" --out {out}" if out is not None else ""),
            err=True,
        )
        raise typer.Exit(code=130) from None
    typer.echo(
        f"{result.ran} runs ran, {result.skipped} skipped (complete), {result.failed} failed "
        f"in {result.wall_s:.1f} s ({executor.value})"
    )
    where = staging.path if staging.keep else out_dir
    failure = first_failure(result.table)
    if failure is not None:
        typer.echo(f"first failure: {failure[1]} ({where / 'runs' / failure[0] / 'error.txt'})")
    if staging.keep:
        typer.echo(kept_aside(out_dir, "sweep", f"simkv sweep {sweep_file} --resume"), err=True)
    else:
        _print_results(out_dir)
        typer.echo(f"wrote {out_dir / 'sweep.parquet'}")
        typer.echo(f"wrote {out_dir / 'report.html'}")
    if result.failed:
        raise typer.Exit(code=1)


def _print_results(sweep_dir: Path) -> None:
    """The compact table of the runs, then the report's headline (answer first)."""
    from rich.console import Console

    from simkv.report.sweep_folder import load_sweep_folder
    from simkv.report.sweep_report import headline
    from simkv.report.sweep_terminal import sweep_table

    sweep = load_sweep_folder(sweep_dir)
    console = Console(highlight=False)
    console.print(sweep_table(sweep))
    for line in headline(sweep_dir, sweep, names=False):
        console.print(line, markup=False)


def report(
    ctx: typer.Context,
    run_dirs: Annotated[list[Path], typer.Argument(help="Run or sweep folders.")],
    out: Annotated[
        Path | None, typer.Option(help="Comparison report file [default: reports/compare.html]")
    ] = None,
    force: ForceOption = False,
) -> None:
    """Rebuild the report of a run (or sweep) folder, or compare several runs in one report."""
    from simkv.outputs import claim_file, claim_folder, write_file
    from simkv.report.run_report import render_comparison_report, write_run_report
    from simkv.report.sweep_report import write_sweep_report

    with input_errors(ctx):
        for run_dir in run_dirs:
            if not run_dir.is_dir():
                raise InputError("not a run or sweep folder", file=run_dir)
        if len(run_dirs) > 1:
            target = out or Path("reports") / "compare.html"
            with claim_file(target, simkv_page, "a simkv page", force=force) as path:
                write_file(path, render_comparison_report(run_dirs))
            written = [target]
        else:
            one = run_dirs[0]
            with claim_folder(one) as folder:
                sweep_dir = (folder / "sweep.parquet").is_file()
                made = write_sweep_report(folder) if sweep_dir else write_run_report(folder)
            written = [one / made.name]
    for path in written:
        typer.echo(f"wrote {path}")
