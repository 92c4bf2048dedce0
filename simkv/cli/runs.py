"""``simkv run``, ``trace``, ``validate`` and ``schema``: one config, one run."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from simkv.cli.common import ForceOption, SetOption, input_errors
from simkv.errors import InputError
from simkv.metrics.frame_format import FrameFormat

if TYPE_CHECKING:
    from simkv.config.sim import SimConfig
    from simkv.metrics.trace import TraceWindow
    from simkv.run.simulate import RunOutput


def _print_summary(summary: dict[str, Any], title: str, cfg: SimConfig) -> None:
    """The summary in grouped sections, then the SLO verdict (80 columns fit)."""
    from rich.console import Console

    from simkv.report.terminal import summary_table
    from simkv.report.verdict import verdict_lines

    console = Console(highlight=False)
    console.print(summary_table(summary, title))
    for passed, line in verdict_lines(summary, cfg.slo.model_dump()):
        style = {True: "green", False: "bold red", None: "bold"}[passed]
        console.print(line, style=style, markup=False)


def _percentiles(text: str | None) -> tuple[float, ...]:
    if not text:
        return ()
    try:
        qs = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        message = f"expected comma-separated numbers, got {text!r}"
        raise InputError(message, field="--percentiles") from None
    if any(not 0 <= q <= 100 for q in qs):
        raise InputError("percentiles lie between 0 and 100", field="--percentiles")
    return qs


def run(
    ctx: typer.Context,
    config: Annotated[Path, typer.Argument(help="Run config (YAML).")],
    out: Annotated[
        Path | None, typer.Option(help="Output directory [default: reports/<run name>]")
    ] = None,
    set_: SetOption = None,
    check: Annotated[
        bool, typer.Option(help="Check every KV invariant after every step (slow).")
    ] = False,
    percentiles: Annotated[
        str | None,
        typer.Option(
            metavar="Q,Q,...",
            help="Extra latency percentiles, e.g. 50,90,99,99.9 (p90, p99 always).",
        ),
    ] = None,
    fmt: Annotated[
        FrameFormat, typer.Option("--format", help="File format of the frames.")
    ] = FrameFormat.parquet,
    trace: Annotated[
        bool, typer.Option(help="Also write trace.json (Chrome / Perfetto timeline).")
    ] = False,
    force: ForceOption = False,
) -> None:
    """Simulate one config; write frames, summary, resolved config and report.html."""
    from simkv.outputs import Kind, new_output
    from simkv.progress import stderr_status
    from simkv.run import load_config

    with input_errors(ctx):
        qs = _percentiles(percentiles)
        cfg = load_config(config, set_ or [])
        out_dir = out or Path("reports") / cfg.name
        with _interrupted(out_dir), new_output(out_dir, Kind.RUN, force=force) as staging:
            work = staging.path
            result = _simulate(config, set_ or [], cfg, check, qs)
            from simkv.report.run_report import write_run_folder  # the report stack, only now

            with stderr_status(f"writing {out_dir}: frames, summary and report.html"):
                paths = write_run_folder(result, work, fmt, trace)
    _print_summary(result.summary, f"{cfg.name}: {result.wall_s:.2f} s wall", cfg)
    for path in paths:
        typer.echo(f"wrote {out_dir / path.relative_to(work)}")


def _simulate(
    config: Path, sets: list[str], cfg: SimConfig, check: bool, qs: tuple[float, ...]
) -> RunOutput:
    """One run with a progress bar; a stall is a run-time failure, not bad input: exit 1."""
    from simkv.config.sim import located_in
    from simkv.engine.progress import SimulationStalled
    from simkv.progress import stderr_progress
    from simkv.run import simulate

    try:
        with located_in(config, sets), stderr_progress(f"simulating {cfg.name}") as progress:
            return simulate(cfg, config.parent, progress=progress, check_invariants=check,
                            percentiles=qs)  # fmt: skip
    except SimulationStalled as err:
        typer.echo(f"error: {config}: {err}", err=True)
        raise typer.Exit(code=1) from None


@contextmanager
def _interrupted(out_dir: Path) -> Iterator[None]:
    """Ctrl-C: one line saying that the output folder is as it was, and exit code 130."""
    try:
        yield
    except KeyboardInterrupt:
        typer.echo(f"interrupted: nothing was written; {out_dir} is as it was", err=True)
        raise typer.Exit(code=130) from None


def _window(from_s: float | None, to_s: float | None, limit: int | None) -> TraceWindow:
    """The trace window of ``--from``, ``--to`` and ``--limit``, checked."""
    from simkv.metrics.trace import MAX_REQUEST_TRACKS, TraceWindow

    for name, value in (("--from", from_s), ("--to", to_s)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise InputError(f"expected seconds ≥ 0, got {value:g}", field=name)
    if from_s is not None and to_s is not None and to_s <= from_s:
        raise InputError(f"must be after --from ({from_s:g} s), got {to_s:g}", field="--to")
    if limit is not None and limit < 1:
        raise InputError(f"expected at least 1 request, got {limit}", field="--limit")
    return TraceWindow(from_s, to_s, MAX_REQUEST_TRACKS if limit is None else limit)


def trace_cmd(
    ctx: typer.Context,
    run_dir: Annotated[Path, typer.Argument(help="Run folder (frames as Parquet or CSV).")],
    from_s: Annotated[
        float | None,
        typer.Option("--from", metavar="S", help="Keep what happens from S s of simulated time."),
    ] = None,
    to_s: Annotated[
        float | None,
        typer.Option("--to", metavar="S", help="Keep what happens until S s of simulated time."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            metavar="N", help="Most request tracks (the earliest arrivals) [default: 2000]"
        ),
    ] = None,
) -> None:
    """Write RUN_DIR/trace.json: steps, preemption and swap markers, and request spans for
    ui.perfetto.dev or chrome://tracing."""
    from simkv.metrics.trace import unsplit_note, write_trace
    from simkv.outputs import claim_folder

    with input_errors(ctx):
        window = _window(from_s, to_s, limit)
        if not run_dir.is_dir():  # the lock lives beside the folder: there must be one
            message = "not a simkv run folder: missing requests.parquet or .csv"
            raise InputError(message, file=run_dir)
        with claim_folder(run_dir) as folder:
            path = write_trace(folder, window=window)
            note = unsplit_note(folder)
    if note is not None:
        typer.echo(f"note: {run_dir}: {note}", err=True)
    typer.echo(f"wrote {run_dir / path.name}")


def validate(
    ctx: typer.Context,
    config: Annotated[Path, typer.Argument(help="Run config (YAML).")],
    set_: SetOption = None,
) -> None:
    """Validate a run config and print it fully resolved (every default and preset value)."""
    from simkv.config.sim import dump_resolved, located_in
    from simkv.run import load_config
    from simkv.run.inputs import check_groups

    with input_errors(ctx), located_in(config, set_ or []):
        cfg = load_config(config, set_ or [])
        groups = check_groups(cfg)
    typer.echo(dump_resolved(cfg), nl=False)
    for k, group in enumerate(groups):
        sizing = group.sizing
        where = f" (replica group {k}, {group.count} replicas)" if cfg.fleet is not None else ""
        typer.echo(
            f"# KV cache{where}: {sizing.num_blocks} blocks x {sizing.block_size} tokens = "
            f"{sizing.token_slots} token slots; {sizing.swap_blocks} CPU swap blocks"
        )


def schema() -> None:
    """Print the run config's JSON schema (every field, default and description)."""
    import json

    from simkv.config.sim import SimConfig

    typer.echo(json.dumps(SimConfig.model_json_schema(), indent=2))
