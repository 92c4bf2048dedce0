"""The Typer app, its ``--version``/``--debug`` callback and the error boundary shared by every
command: an :class:`InputError` becomes its lines on stderr and exit code 2."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from simkv import __version__
from simkv.errors import InputError

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
    """The CLI's error boundary: an :class:`InputError` (or an OS error writing an output)
    becomes its lines on stderr and exit code 2; ``--debug`` shows the traceback instead."""
    obj = ctx.find_root().obj
    debug = isinstance(obj, dict) and bool(obj.get("debug"))
    try:
        yield
    except InputError as err:
        if debug:
            raise
        raise fail(err) from None
    except OSError as err:
        if debug:
            raise
        raise fail(InputError(f"cannot write: {err.strerror}", file=err.filename)) from None


def output_folder(path: Path) -> Path:
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
