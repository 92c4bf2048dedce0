"""The ``simkv`` command line: parse options, call the library, print. No simulation logic."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from simkv import __version__
from simkv.analysis.waste_study import WasteParams, WasteStudy, make_params, run_waste_study
from simkv.errors import InputError
from simkv.metrics.files import FrameFormat
from simkv.metrics.text import format_value
from simkv.progress import stderr_progress, stderr_status
from simkv.sweep.executors import EXECUTOR_KINDS
from simkv.workload.traces import read_lengths

if TYPE_CHECKING:
    from simkv.calibrate.api import Calibration
    from simkv.metrics.recorder import RunFrames

# Help is plain click text: rich markup would eat anything in square brackets ([default: …]).
app = typer.Typer(
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_DEFAULTS = WasteParams()  # frozen: the single source of option defaults
Executor = StrEnum("Executor", {kind: kind for kind in EXECUTOR_KINDS})  # type: ignore[misc]


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"simkv {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of an input error.")
    ] = False,
) -> None:
    """Discrete-event simulator of LLM-serving KV-cache memory management."""
    ctx.obj = {"debug": debug}
    if ctx.invoked_subcommand is None:  # bare `simkv`: the help, and success
        typer.echo(ctx.get_help())
        raise typer.Exit()


@contextmanager
def _input_errors(ctx: typer.Context) -> Iterator[None]:
    """The CLI's error boundary: an :class:`InputError` (or an OS error writing an output)
    becomes its lines on stderr and exit code 2; ``--debug`` shows the traceback instead."""
    obj = ctx.find_root().obj
    debug = isinstance(obj, dict) and bool(obj.get("debug"))
    try:
        yield
    except InputError as err:
        if debug:
            raise
        raise _fail(err) from None
    except OSError as err:
        if debug:
            raise
        raise _fail(InputError(f"cannot write: {err.strerror}", file=err.filename)) from None


def _out_dir(path: Path) -> Path:
    """``path`` if it can be an output folder (nothing is created): an existing file or device,
    or a folder whose nearest existing ancestor is not a writable folder, is an
    :class:`InputError` naming it."""
    if path.exists() and not path.is_dir():
        raise InputError("output is not a folder", file=path)
    ancestor = path.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"cannot create the output folder under {ancestor}", file=path)
    return path


def _int_list(text: str, option: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise InputError(f"expected comma-separated integers, got {text!r}", field=option) from None


def _print_study(study: WasteStudy, paths: list[Path]) -> None:
    console = Console(highlight=False)
    if study.excluded_requests:
        console.print(
            f"excluded {study.excluded_requests:,} of {study.requests:,} sequences longer "
            f"than max context {study.params.max_context_len}"
        )
    for block in study.to_table_rows():
        table = Table(*block.columns, title=block.title)
        for row in block.rows:
            table.add_row(*row)
        console.print(table)
    for path in paths:
        console.print(f"wrote {path}")


@app.command()
def waste(
    ctx: typer.Context,
    trace: Annotated[Path, typer.Argument(help="Trace: Azure, ShareGPT, Mooncake or lengths.")],
    block_sizes: Annotated[
        str, typer.Option(help="Paged block sizes, comma-separated.")
    ] = ",".join(str(size) for size in _DEFAULTS.block_sizes),
    max_context: Annotated[
        int, typer.Option(help="Max context length; longer sequences are excluded (tokens).")
    ] = _DEFAULTS.max_context_len,
    pool_slots: Annotated[
        int, typer.Option(help="KV pool of the replay (slots).")
    ] = _DEFAULTS.pool_slots,
    replay_requests: Annotated[
        int, typer.Option(help="Replay the first N requests.")
    ] = _DEFAULTS.replay_requests,
    column: Annotated[str | None, typer.Option(help="Length column of a plain trace.")] = None,
    out: Annotated[
        Path | None, typer.Option(help="Output directory [default: reports/waste-STEM]")
    ] = None,
) -> None:
    """KV waste of a trace: paged vs contiguous reservations (static snapshot + pool replay)."""
    # matplotlib is imported only by the command that draws, to keep `simkv --help` quick
    from simkv.report.waste_figures import write_waste_figures

    with _input_errors(ctx):
        params = make_params(
            block_sizes=_int_list(block_sizes, "--block-sizes"),
            max_context_len=max_context,
            pool_slots=pool_slots,
            replay_requests=replay_requests,
        )
        study = run_waste_study(read_lengths(trace, column=column), params)
        out_dir = _out_dir(out or Path("reports") / f"waste-{trace.stem}")
        _print_study(study, study.write_csv(out_dir) + write_waste_figures(study, out_dir))


def _fail(err: InputError) -> typer.Exit:
    for line in err.lines():
        typer.echo(f"error: {line}", err=True)
    return typer.Exit(code=2)


def _print_summary(summary: dict[str, float | None], title: str) -> None:
    table = Table("metric", "value", title=title)
    table.columns[1].justify = "right"
    for key, value in summary.items():
        table.add_row(key, format_value(key, value))
    Console(highlight=False).print(table)


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


SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="KEY.PATH=VALUE", help="Override a config value (repeatable)."),
]


@app.command()
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
) -> None:
    """Simulate one config; write frames, summary, resolved config and report.html."""
    from simkv.config.sim import load_config, located_in
    from simkv.engine.progress import SimulationStalled
    from simkv.runner import simulate, write_run

    with _input_errors(ctx):
        qs = _percentiles(percentiles)
        cfg = load_config(config, set_ or [])
        out_dir = _out_dir(out or Path("reports") / cfg.name)
        try:
            with located_in(config, set_ or []), stderr_progress(f"simulating {cfg.name}") as pr:
                result = simulate(cfg, config.parent, progress=pr, check_invariants=check,
                                  percentiles=qs)  # fmt: skip
        except SimulationStalled as err:  # a run-time failure, not bad input: exit 1
            typer.echo(f"error: {config}: {err}", err=True)
            raise typer.Exit(code=1) from None
        from simkv.report.run_report import write_run_report  # the report stack, only now

        with stderr_status(f"writing {out_dir}: frames, summary and report.html"):
            paths = write_run(result, out_dir, fmt)
            if trace:
                paths.append(_write_trace(out_dir, result.frames))
        paths.append(write_run_report(out_dir))
    _print_summary(result.summary, f"{cfg.name}: {result.wall_s:.2f} s wall")
    for path in paths:
        typer.echo(f"wrote {path}")


def _write_trace(run_dir: Path, frames: RunFrames | None = None) -> Path:
    from simkv.metrics.trace import write_trace

    return write_trace(run_dir, frames)


@app.command("trace")
def trace_cmd(
    ctx: typer.Context,
    run_dir: Annotated[Path, typer.Argument(help="Run folder (frames as Parquet or CSV).")],
) -> None:
    """Write RUN_DIR/trace.json: steps and request spans for ui.perfetto.dev or chrome://tracing."""
    with _input_errors(ctx):
        path = _write_trace(run_dir)
    typer.echo(f"wrote {path}")


@app.command()
def validate(
    ctx: typer.Context,
    config: Annotated[Path, typer.Argument(help="Run config (YAML).")],
    set_: SetOption = None,
) -> None:
    """Validate a run config and print it fully resolved (every default and preset value)."""
    from simkv.config.sim import dump_resolved, load_config, located_in
    from simkv.runner import check_kv

    with _input_errors(ctx), located_in(config, set_ or []):
        cfg = load_config(config, set_ or [])
        sizing = check_kv(cfg)
    typer.echo(dump_resolved(cfg), nl=False)
    typer.echo(
        f"# KV cache: {sizing.num_blocks} blocks x {sizing.block_size} tokens = "
        f"{sizing.token_slots} token slots; {sizing.swap_blocks} CPU swap blocks"
    )


@app.command()
def schema() -> None:
    """Print the run config's JSON schema (every field, default and description)."""
    import json

    from simkv.config.sim import SimConfig

    typer.echo(json.dumps(SimConfig.model_json_schema(), indent=2))


@app.command()
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
    from simkv.report.sweep_report import write_sweep_report
    from simkv.sweep.run import run_sweep

    try:
        with _input_errors(ctx):
            if out is not None:
                _out_dir(out)
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
    with _input_errors(ctx):
        report = write_sweep_report(result.out_dir)
    typer.echo(
        f"{result.ran} runs ran, {result.skipped} skipped (complete), {result.failed} failed "
        f"in {result.wall_s:.1f} s ({executor.value})"
    )
    typer.echo(f"wrote {result.out_dir / 'sweep.parquet'}")
    typer.echo(f"wrote {report}")
    if result.failed:
        raise typer.Exit(code=1)


@app.command()
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

    with _input_errors(ctx):
        for run_dir in run_dirs:
            if not run_dir.is_dir():
                raise InputError("not a run or sweep folder", file=run_dir)
        if len(run_dirs) > 1:
            target = out or Path("reports") / "compare.html"
            if target.is_dir() or (target.exists() and not target.is_file()):
                raise InputError("output is not a regular file", file=target)
            _out_dir(target.parent)
            target.write_text(render_comparison_report(run_dirs), encoding="utf-8")
            written = [target]
        else:
            one = run_dirs[0]
            sweep_dir = (one / "sweep.parquet").is_file()
            written = [write_sweep_report(one) if sweep_dir else write_run_report(one)]
    for path in written:
        typer.echo(f"wrote {path}")


_DIFF_STYLES = {"close": "green", "fair": "yellow", "far": "red", "none": ""}


def _print_validation(title: str, rows: list[dict[str, str]], lines: list[str]) -> None:
    """The simulated-vs-measured table (LLMServingSim's validation layout), then ``lines``."""
    caption = "latencies in ms; Diff% = (simulated − measured) / measured"
    table = Table("Metric", "Measured", "Simulated", "Diff%", title=title, caption=caption)
    for column in table.columns[1:]:
        column.justify = "right"
    for i, row in enumerate(rows):
        if i and row["group"] != rows[i - 1]["group"]:
            table.add_section()
        diff = f"[{_DIFF_STYLES[row['level']]}]{row['diff']}[/]" if row["level"] != "none" else "—"
        table.add_row(row["label"], row["measured"], row["simulated"], diff)
    console = Console(highlight=False)
    console.print(table)
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)


@app.command()
def compare(
    ctx: typer.Context,
    run_dir: Annotated[Path, typer.Argument(help="Run folder of a replay of the measurement.")],
    measured: Annotated[
        Path, typer.Option(help="Measured run: run folder, vllm bench JSON or generic CSV.")
    ],
    out: Annotated[
        Path | None, typer.Option(help="HTML page [default: RUN_DIR/compare.html]")
    ] = None,
) -> None:
    """Simulated vs measured, per metric (Diff%); writes compare.html and compare.csv."""
    from simkv.report.compare_real import (
        CSV_FILE,
        HTML_FILE,
        compare_with_measured,
        headline_text,
        table_rows,
        write_comparison,
    )

    with _input_errors(ctx):
        cmp = compare_with_measured(run_dir, measured)
    title = f"{cmp.run.name} vs measured {cmp.measured.label}"
    notes = [headline_text(cmp.validation), *cmp.validation.notes]
    _print_validation(title, table_rows(cmp.validation.rows), notes)
    for path in write_comparison(cmp, out or run_dir / HTML_FILE, run_dir / CSV_FILE):
        typer.echo(f"wrote {path}")


def _print_calibration(cal: Calibration, out: Path) -> None:
    from simkv.calibrate.api import residual_rows

    console = Console(highlight=False)
    fit = cal.result
    table = Table(
        "knob", "start", "fitted", title=f"calibration on {cal.label} ({cal.level} level)"
    )
    for knob in fit.knobs:
        table.add_row(knob, f"{getattr(fit.start, knob):.4g}", f"{getattr(fit.config, knob):.4g}")
    console.print(table)
    if cal.level == "step":
        rows = Table(
            "model",
            "tp",
            "phase",
            "steps",
            "mean abs. error",
            "bias",
            title="residuals by model, tensor-parallel degree and phase",
        )
        for model, tp, phase, n, mae, bias in residual_rows(cal):
            rows.add_row(model, str(tp), phase, str(n), f"{mae:.1%}", f"{bias:+.1%}")
        console.print(rows)
    if cal.validations:
        from simkv.report.compare_real import headline_text, table_rows

        for label, validation in cal.validations:
            title = f"{label}: measured vs simulated with the fitted profile"
            _print_validation(title, table_rows(validation.rows), [headline_text(validation)])
    what = "step times" if cal.level == "step" else "TTFT/TPOT/E2E mean, p50, p90, p99"
    console.print(
        f"mean abs. error over {what}: {fit.start_error:.1%} → {fit.error:.1%} "
        f"({fit.evaluations} evaluations)"
    )
    for knob in fit.at_bounds:
        console.print(f"note: {knob} ended at a bound of its range (simkv.calibrate.fit.KNOBS)")
    for note in cal.notes:
        console.print(f"note: {note}")
    typer.echo(f"wrote {out}")


@app.command()
def calibrate(
    ctx: typer.Context,
    sources: Annotated[
        list[Path],
        typer.Argument(
            help="Measurements, fitted together: measured runs (vLLM run folder, vllm bench "
            "JSON, request CSV) or step tables (DistServe JSON, Splitwise CSV, step CSV)."
        ),
    ],
    config: Annotated[
        list[Path] | None,
        typer.Option(
            help="Replay config of each measured run, in order (default: built from the run's "
            "engine settings and the presets matching its model and GPU)."
        ),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model preset or alias.")] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU preset or alias.")] = None,
    tp: Annotated[
        str | None,
        typer.Option(help="Fit only steps at these tensor-parallel degrees, comma-separated."),
    ] = None,
    fit: Annotated[
        str | None,
        typer.Option(help="Knobs to fit, comma-separated (default: see simkv.calibrate.api)."),
    ] = None,
    start: Annotated[
        Path | None,
        typer.Option(
            help="Start from this calibration profile (default: the roofline's defaults)."
        ),
    ] = None,
    max_evals: Annotated[int, typer.Option(help="Simulations a request-level fit may run.")] = 150,
    max_error: Annotated[
        float,
        typer.Option(help="Exit 1 when the fitted mean abs. error (a fraction) stays above this."),
    ] = 0.2,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Profile to write; default: reports/calibrate-<source name>/profile.yaml"
        ),
    ] = None,
) -> None:
    """Fit the roofline cost model to real measurements and write a calibration profile."""
    from simkv.calibrate.api import calibrate as run_calibration
    from simkv.config.profile import read_profile, write_profile

    with _input_errors(ctx):
        cal = run_calibration(
            sources,
            start=read_profile(start) if start else None,
            knobs=[k.strip() for k in fit.split(",") if k.strip()] if fit else None,
            configs=config or (),
            model=model,
            gpu=gpu,
            tp=_int_list(tp, "--tp") if tp else None,
            max_evaluations=max_evals,
        )
    path = out or Path("reports") / f"calibrate-{cal.label}" / "profile.yaml"
    header = [
        f"simkv calibration profile: {cal.level}-level fit on {', '.join(map(str, sources))}",
        f"fitted: {', '.join(cal.result.knobs)}; the other values are the start's",
        f"mean abs. error {cal.result.error:.2%} (start {cal.result.start_error:.2%})",
        "use it from a run config: cost_model: {profile: <path to this file>}",
    ]
    _print_calibration(cal, write_profile(cal.result.config, path, header))
    if cal.result.error > max_error:
        typer.echo(
            f"error: the fit stays at {cal.result.error:.1%} mean abs. error, above "
            f"--max-error {max_error:.0%}: the data do not fit this model",
            err=True,
        )
        raise typer.Exit(code=1)
