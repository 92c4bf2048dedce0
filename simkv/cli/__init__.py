"""The ``simkv`` command line: parse options, call the library, print. No simulation logic.

:mod:`simkv.cli.common` holds the Typer app and the error boundary; one module per command
group holds the commands, registered here in the order the help lists them. The library is
imported inside each command, so ``simkv --help`` loads neither the engine nor the reports.
"""

import os
import sys

from simkv.cli import cache_curve, capacity, measured, runs, sweeps, waste
from simkv.cli.common import app

app.command()(waste.waste)
app.command("cache-curve")(cache_curve.cache_curve)
app.command()(runs.run)
app.command("trace")(runs.trace_cmd)
app.command()(runs.validate)
app.command()(runs.schema)
app.command()(sweeps.sweep)
app.command()(sweeps.report)
app.command()(capacity.capacity)
app.command()(measured.compare)
app.command()(measured.calibrate)

__all__ = ["app"]


def main() -> None:
    """The ``simkv`` entry point: :data:`app`, except that a command refused for bad input
    (exit code 2, its one line already written) leaves with ``os._exit`` once its output is
    flushed. That skips the interpreter's teardown of native thread pools: a pyarrow read
    just before the refusal can leave pool threads starting up, and tearing them down then
    has been seen to abort the process ("terminate called without an active exception",
    exit -6) instead of exiting 2. Input errors are found before any worker or Ray session
    starts, so nothing is left for teardown to do."""
    try:
        app()
    except SystemExit as exit_:
        if exit_.code == 2:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(2)
        raise
