"""Errors that reach the user as one line: ``file:line field: message`` (exit code 2)."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Bad user input (config, trace, CLI value), located as precisely as known.

    ``str(err)`` is the one line the CLI prints: ``file:line field: message``; parts that are
    unknown are left out (``file: message``, ``field: message``).
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        super().__init__(self.format())

    def format(self) -> str:
        where = self.file or ""
        if where and self.line is not None:
            where = f"{where}:{self.line}"
        head = " ".join(part for part in (where, self.field) if part)
        return f"{head}: {self.message}" if head else self.message
