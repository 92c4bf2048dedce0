"""Errors that reach the user as one line each: ``file:line field: message`` (exit code 2)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class InputError(Exception):
    """Bad user input (config, trace, CLI value), located as precisely as known.

    ``str(err)`` is the one line the CLI prints: ``file:line field: message``; parts that are
    unknown are left out (``file: message``, ``field: message``). ``file`` is ``--set`` when the
    value came from a ``--set`` item. ``also`` holds further errors of the same input (all the
    errors of a config at once), printed one a line after this one.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        also: Sequence[InputError] = (),
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        self.also = tuple(also)
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        """One line per error: this one, then ``also``."""
        return [self.format(), *(err.format() for err in self.also)]

    def format(self) -> str:
        """This error's line (without ``also``)."""
        where = self.file or ""
        if where and self.line is not None:
            where = f"{where}:{self.line}"
        head = " ".join(part for part in (where, self.field) if part)
        # one line, whatever the message quotes (str.splitlines knows every line boundary)
        message = " ".join(part.strip() for part in self.message.splitlines()).strip()
        return f"{head}: {message}" if head else message


def all_of(errors: Sequence[InputError]) -> InputError:
    """One error holding every line of ``errors`` (their ``also`` included) once each, sorted
    by line, ``--set`` errors last: the first line is the error, the others its ``also``."""
    flat = [one for err in errors for one in (err, *err.also)]
    unique = list({err.format(): err for err in flat}.values())
    unique.sort(key=lambda err: (err.file == "--set", err.line or 0))
    first = unique[0]
    return InputError(
        first.message, file=first.file, line=first.line, field=first.field, also=unique[1:]
    )
