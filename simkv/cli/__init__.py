"""The ``simkv`` command line: parse options, call the library, print. No simulation logic.

:mod:`simkv.cli.common` holds the Typer app and the error boundary; one module per command
group holds the commands, registered here in the order the help lists them. The library is
imported inside each command, so ``simkv --help`` loads neither the engine nor the reports.
"""

from simkv.cli import measured, runs, sweeps, waste
from simkv.cli.common import app

app.command()(waste.waste)
app.command()(runs.run)
app.command("trace")(runs.trace_cmd)
app.command()(runs.validate)
app.command()(runs.schema)
app.command()(sweeps.sweep)
app.command()(sweeps.report)
app.command()(measured.compare)
app.command()(measured.calibrate)

__all__ = ["app"]
