"""JSON documents with line-numbered errors: read one, and find where a key path is written."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simkv.errors import InputError
from simkv.text import parse_json, read_text


@dataclass(frozen=True)
class JsonDoc:
    """A parsed JSON file and its text (to locate keys for error messages)."""

    path: Path
    data: Any
    text: str

    def line_of(self, *keys: str) -> int | None:
        """1-based line where the key path ``keys`` is written, or None if not found.

        Each key is searched after the previous one, which finds nested keys in the usual
        layout (a key written after its parent's); good enough to point a reader at the value.
        """
        pos = 0
        for key in keys:
            pos = self.text.find(json.dumps(key), pos)
            if pos < 0:
                return None
        return self.text.count("\n", 0, pos) + 1

    def fail(self, message: str, *keys: str) -> InputError:
        """An error about the value at the key path ``keys``, located at the line of that key
        or of its nearest written ancestor (line 1, the document, for a missing top-level key)."""
        lines = (self.line_of(*keys[:cut]) for cut in range(len(keys), 0, -1))
        line = next((found for found in lines if found is not None), 1)
        return InputError(message, file=self.path, line=line, field=".".join(keys) or None)


def read_json(path: Path, *, hint: str = "") -> JsonDoc:
    """Parse a JSON file; an empty or invalid one, too large or too deep (the limits of
    :mod:`simkv.text`), is an InputError with the line (plus ``hint``)."""
    text = read_text(path)
    if not text.strip():
        raise InputError("empty file", file=path)
    return JsonDoc(path, parse_json(text, path, hint=hint), text)
