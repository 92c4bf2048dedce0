"""The Typer app, its ``--version``/``--debug`` callback and the error boundary shared by every
command: an :class:`InputError` becomes its lines on stderr and exit code 2."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from simkv import __version__
from simkv.errors import InputError
from simkv.outputs import cannot

if TYPE_CHECKING:
    from simkv.capacity.run import RunFailure
    from simkv.outputs import Staging

# Help is plain click text: rich markup would eat anything in square brackets ([default: …]).
app = typer.Typer(
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


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
def input_errors(ctx: typer.Context) -> Iterator[None]:
    """The CLI's error boundary, the same for every command: an :class:`InputError` (an OS
    error too: :func:`simkv.outputs.cannot` names its path and operation) becomes its lines on
    stderr and exit code 2; ``--debug`` shows the traceback instead."""
    obj = ctx.find_root().obj
    debug = isinstance(obj, dict) and bool(obj.get("debug"))
    try:
        yield
    except InputError as err:
        if debug:
            raise
        raise fail(err) from None
    except OSError as err:  # the writers name their path (simkv.outputs); this is the rest
        if debug:
            raise
        raise fail(cannot("read or write", err.filename, err)) from None


def int_list(text: str, option: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise InputError(f"expected comma-separated integers, got {text!r}", field=option) from None


def fail(err: InputError) -> typer.Exit:
    for line in err.lines():
        typer.echo(f"error: {line}", err=True)
    return typer.Exit(code=2)


SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="KEY.PATH=VALUE", help="Override a config value (repeatable)."),
]

ForceOption = Annotated[
    bool,
    typer.Option(
        "--force", help="Replace an output that holds another kind of output or foreign files."
    ),
]


def simkv_page(path: Path) -> bool:
    """Whether ``path`` is an HTML page simkv wrote (its generator tag in the first 4 KB)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return b'<meta name="generator" content="simkv' in head


def simkv_profile(path: Path) -> bool:
    """Whether ``path`` is a calibration profile simkv wrote (its first comment line)."""
    try:
        with path.open("rb") as handle:
            return handle.read(64).startswith(b"# simkv calibration profile")
    except OSError:
        return False


def interrupted_search(out_dir: Path) -> str:
    """The line of an interrupted search: what is kept, where, and how to go on."""
    return (
        f"interrupted: {out_dir} is as it was; the finished runs are kept beside it (in "
        f".{out_dir.name}.partial) and the same command continues where this one stopped"
    )


def kept_aside(out_dir: Path, what: str, again: str) -> str:
    """The line of a sweep or search whose runs failed over a complete earlier one: the
    earlier output stays, the new one waits beside it for ``again``."""
    return (
        f"{out_dir} is as it was: this {what} had failed runs, so it was not published over "
        f"the complete earlier one; its results wait in .{out_dir.name}.partial beside it. "
        f"Fix the cause and continue with: {again}"
    )


def shown_failure(failure: RunFailure | None, staging: Staging, out_dir: Path) -> RunFailure | None:
    """``failure`` with its run folder where the user finds it: in ``out_dir`` once the search
    is published, else in the staging folder that waits beside it."""
    if failure is None or staging.keep:
        return failure
    return replace(failure, run_dir=out_dir / failure.run_dir.relative_to(staging.path))


def print_at_answer(folder: Path, axis: str, value: float, where: str) -> None:
    """The p99s and the binding SLO of the search's run at its answer (``axis`` = ``value``,
    read from ``folder``'s sweep table); nothing when that run is not in it."""
    from simkv.report.sweep_folder import STATUS_OK, load_sweep_folder
    from simkv.report.verdict import answer_lines

    table = load_sweep_folder(folder).table
    rows = table[(table["status"] == STATUS_OK) & (table[axis].astype("float64") == value)]
    if not rows.empty:
        for line in answer_lines(rows.iloc[0].to_dict(), where):
            typer.echo(line)


def rate_rounds(step: Callable[[str, int], None]) -> Callable[[list[float]], None]:
    """The search's round callback: the rates of each round, and the runs done before it."""
    done = 0

    def on_round(rates: list[float]) -> None:
        nonlocal done
        step("simulating " + ", ".join(f"{r:g}" for r in rates) + " req/s", done)
        done += len(rates)

    return on_round
