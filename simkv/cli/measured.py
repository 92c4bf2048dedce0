"""``simkv compare`` and ``simkv calibrate``: simulated vs measured runs, and fitting to them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from simkv.cli.common import ForceOption, input_errors, int_list, simkv_page, simkv_profile

if TYPE_CHECKING:
    from simkv.calibrate.api import Calibration
    from simkv.calibrate.trust import Trust

MAX_EVALS = 10_000
"""Most simulations ``--max-evals`` allows a request-level fit (each is a full replay)."""
MAX_ERROR = 100.0
"""Largest ``--max-error``, a fraction (100 = 10,000 %); the range refuses NaN, which would
accept every fit."""
_DIFF_STYLES = {"close": "green", "fair": "yellow", "far": "red", "none": ""}


def _print_validation(title: str, rows: list[dict[str, str]], lines: list[str]) -> None:
    """The simulated-vs-measured table (LLMServingSim's validation layout), then ``lines``."""
    from rich.console import Console
    from rich.table import Table

    caption = "Diff% = (simulated − measured) / measured"
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


def compare(
    ctx: typer.Context,
    run_dir: Annotated[Path, typer.Argument(help="Run folder of a replay of the measurement.")],
    measured: Annotated[
        Path, typer.Option(help="Measured run: run folder, vllm bench JSON or generic CSV.")
    ],
    out: Annotated[
        Path | None, typer.Option(help="HTML page [default: RUN_DIR/compare.html]")
    ] = None,
    force: ForceOption = False,
) -> None:
    """Simulated vs measured, per metric (Diff%); writes compare.html and compare.csv."""
    from simkv.metrics.saturation import saturation_lines
    from simkv.outputs import claim_file, claim_folder
    from simkv.report.compare_real import (
        CSV_FILE,
        HTML_FILE,
        compare_with_measured,
        headline_text,
        table_rows,
        write_comparison,
    )

    with input_errors(ctx):
        cmp = compare_with_measured(run_dir, measured)
        page = out or run_dir / HTML_FILE
        with claim_folder(run_dir) as folder:
            if out is None:
                write_comparison(cmp, folder / HTML_FILE, folder / CSV_FILE)
            else:
                with claim_file(out, simkv_page, "a simkv page", force=force) as path:
                    write_comparison(cmp, path, folder / CSV_FILE)
    title = f"{cmp.run.name} vs measured {cmp.measured.label}"
    split = cmp.validation.saturation
    notes = [headline_text(cmp.validation), *([] if split is None else saturation_lines(split)),
             *cmp.validation.notes]  # fmt: skip
    _print_validation(title, table_rows(cmp.validation.rows), notes)
    for path in (page, run_dir / CSV_FILE):
        typer.echo(f"wrote {path}")


def _print_calibration(cal: Calibration) -> None:
    from rich.console import Console
    from rich.table import Table

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
    if cal.trust is not None:
        trust = cal.trust
        for line in (trust.holdout, trust.data_range, trust.pattern, trust.extrapolation):
            if line is not None:
                console.print(line, soft_wrap=True)
    for note in cal.notes:
        console.print(f"note: {note}")


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
    max_evals: Annotated[
        int, typer.Option(help=f"Simulations a request-level fit may run, 1..{MAX_EVALS}.")
    ] = 150,
    max_error: Annotated[
        float,
        typer.Option(
            help="Exit 1 when the fitted mean abs. error (a fraction, 0..100) stays above this."
        ),
    ] = 0.2,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Profile to write; default: reports/calibrate-<source name>/profile.yaml"
        ),
    ] = None,
    force: ForceOption = False,
) -> None:
    """Fit the roofline cost model to real measurements and write a calibration profile."""
    from simkv.calibrate.api import calibrate as run_calibration
    from simkv.config.profile import read_profile, write_profile
    from simkv.outputs import claim_file
    from simkv.progress import stderr_progress

    what = "a calibration profile"
    with input_errors(ctx):
        _check_limits(max_evals, max_error)
        if out is not None:  # refused before the fit, not after it
            with claim_file(out, simkv_profile, what, force=force):
                pass
        with stderr_progress("calibrating") as progress:
            cal = run_calibration(
                sources,
                start=read_profile(start) if start else None,
                knobs=[k.strip() for k in fit.split(",") if k.strip()] if fit else None,
                configs=config or (),
                model=model,
                gpu=gpu,
                tp=int_list(tp, "--tp") if tp else None,
                max_evaluations=max_evals,
                progress=progress,
            )
    path = out or Path("reports") / f"calibrate-{cal.label}" / "profile.yaml"
    header = [
        f"simkv calibration profile: {cal.level}-level fit on {', '.join(map(str, sources))}",
        f"fitted: {', '.join(cal.result.knobs)}; the other values are the start's",
        f"mean abs. error {cal.result.error:.2%} (start {cal.result.start_error:.2%})",
        *([] if cal.trust is None else _trust_header(cal.trust)),
        *_clock_line(cal.result.config.latency_clock_mhz),
        "use it from a run config: cost_model: {profile: <path to this file>}",
    ]
    _print_calibration(cal)
    if cal.result.error > max_error:  # a rejected fit is never published
        typer.echo(
            f"error: the fit stays at {cal.result.error:.1%} mean abs. error, above "
            f"--max-error {max_error:.0%}: the data do not fit this model; {path} was not "
            "written",
            err=True,
        )
        if cal.trust is not None:
            typer.echo(cal.trust.verdict, err=True)
        raise typer.Exit(code=1)
    with input_errors(ctx), claim_file(path, simkv_profile, what, force=force) as target:
        write_profile(cal.result.config, target, header)
    typer.echo(f"wrote {path}")
    _print_use(cal, path)


def _trust_header(trust: Trust) -> list[str]:
    """The profile header's lines on how far to trust the fit: all but the residual pattern
    (a diagnosis of the fit, not a property of the profile)."""
    said = (trust.holdout, trust.data_range, trust.extrapolation, trust.verdict)
    return [line for line in said if line is not None]


def _clock_line(clock_mhz: float | None) -> list[str]:
    """The profile's line on ``latency_clock_mhz`` (none when unset)."""
    if clock_mhz is None:
        return []
    return [f"latency_clock_mhz {clock_mhz:g}: the fitted GPU's clock; on another GPU the fixed "
            "latencies scale by it / the GPU's boost_clock_mhz"]  # fmt: skip


def _print_use(cal: Calibration, path: Path) -> None:
    """How to use the profile, and one plausibility line per fitted knob."""
    from simkv.calibrate.plausible import plausibility

    typer.echo("use it: cost_model: {profile: PATH} in a run config (PATH relative to it)")
    typer.echo(f"    or: simkv run CONFIG --set 'cost_model={{profile: {path.resolve()}}}'")
    typer.echo("plausibility of the fitted knobs:")
    for knob in cal.result.knobs:
        plausible, line = plausibility(knob, getattr(cal.result.config, knob))
        typer.echo(("  ok     " if plausible else "  check  ") + line)
    if cal.trust is not None:
        typer.echo(cal.trust.verdict)


def _check_limits(max_evals: int, max_error: float) -> None:
    """:class:`InputError` at ``--max-evals`` outside 1..:data:`MAX_EVALS` or ``--max-error``
    outside 0..:data:`MAX_ERROR` (NaN included)."""
    from simkv.errors import InputError

    if not 1 <= max_evals <= MAX_EVALS:
        raise InputError(f"must lie in 1..{MAX_EVALS}, got {max_evals}", field="--max-evals")
    if not 0 <= max_error <= MAX_ERROR:
        message = f"must lie in 0..{MAX_ERROR:g} (a fraction), got {max_error:g}"
        raise InputError(message, field="--max-error")
