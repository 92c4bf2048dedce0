"""Progress and status on stderr for long runs (stdout stays for results).

Both draw only on a terminal: piped or captured stderr gets neither bars nor the blank line a
finished live display leaves behind.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


def _ignore(done: int, total: int) -> None:
    """A progress callback that draws nothing."""


@contextmanager
def stderr_progress(description: str) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback drawing a rich bar on stderr (nothing off a tty)."""
    console = Console(stderr=True)
    if not console.is_terminal:
        yield _ignore
        return
    columns = (
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
    )  # fmt: skip
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


@contextmanager
def stderr_status(message: str) -> Iterator[None]:
    """A spinner with ``message`` on stderr while the block runs (on a terminal only)."""
    console = Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    with console.status(message):
        yield


@contextmanager
def stderr_rounds(description: str, total: int) -> Iterator[Callable[[str, int], None]]:
    """A ``step(line, done)`` callback for a search in rounds: ``line`` (the round's runs) is
    printed on stderr, and on a terminal a rich bar shows ``done`` of about ``total`` runs
    (the total grows if the search runs longer)."""
    console = Console(stderr=True)
    if not console.is_terminal:

        def echo(line: str, done: int) -> None:
            print(line, file=sys.stderr)

        yield echo
        return
    columns = (
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
    )  # fmt: skip
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=total)

        def step(line: str, done: int) -> None:
            bar.console.print(line, markup=False, highlight=False)
            bar.update(task, completed=done, total=max(total, done + 1))

        yield step
