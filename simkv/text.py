"""User files as text, every problem located: a byte that is not UTF-8 is an
:class:`~simkv.errors.InputError` with its line, an unreadable file one with the file.

The limits of every user file simkv reads (traces of every format, measured runs, step tables,
bench and meta JSON, profiles, sweep files read back) are here, in one place; beyond them a
file is refused with one located line, never read into memory whole:

* :data:`MAX_LINE_BYTES`: a line of a table (CSV or JSON-lines), and so every field of it,
  is read line by line (:func:`read_lines`), never the whole file at once;
* :data:`MAX_DOCUMENT_BYTES`: a file read whole (a JSON document, a YAML config);
* :data:`MAX_JSON_DEPTH`: nesting of JSON arrays and objects (:func:`parse_json`), checked
  before parsing, so no JSON reader recurses without bound.

A ground module without heavy imports (config loading uses it: ``simkv --help`` stays light);
:mod:`simkv.tables` reads tables on top of it.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simkv.errors import InputError

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "LineStream",
    "csv_rows",
    "decode_utf8",
    "parse_json",
    "read_csv",
    "read_json_file",
    "read_lines",
    "read_text",
]

MAX_LINE_BYTES = 2**20
"""Longest line of a table (a CSV row, a JSON-lines record): 1 MiB, so also its longest field.
A CSV row whose quoted field spans lines counts as one line. Real rows are under 10 KB (a
Mooncake row of 128k tokens holds 250 hash ids, 2 KB); a step table's CSV field is further
bounded by Python's csv module, 131,072 characters."""
MAX_DOCUMENT_BYTES = 2**30
"""Largest file read whole (1 GiB): a JSON document (a ``vllm bench`` result with per-request
inter-token latencies is tens of MB for 10,000 requests) or a YAML config."""
MAX_JSON_DEPTH = 64
"""Deepest nesting of JSON arrays and objects (as YAML's: simkv's own files nest under 6)."""


def decode_utf8(raw: bytes, file: str, first_line: int = 1) -> str:
    """``raw`` as UTF-8 text; a byte that is not UTF-8 is an :class:`InputError` with its line
    (``raw`` starting at line ``first_line`` of ``file``)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + first_line
        message = f"not UTF-8 text (byte 0x{raw[err.start]:02x})"
        raise InputError(message, file=file, line=line) from None


def read_text(path: Path, limit: int = MAX_DOCUMENT_BYTES) -> str:
    """A file's UTF-8 text (a byte-order mark dropped), at most ``limit`` bytes;
    :class:`InputError` when unreadable or larger."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", file=path) from None
    if len(raw) > limit:
        raise InputError(f"larger than {limit} bytes, the limit of a file read whole", file=path)
    return decode_utf8(raw, str(path)).removeprefix("\ufeff")


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line of ``path``, newline kept, BOM dropped, streamed:
    a line over :data:`MAX_LINE_BYTES` is an :class:`InputError` at its line, before it is
    read whole."""
    try:
        handle = path.open("rb")
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", file=path) from None
    with handle:
        number = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                message = f"line longer than {MAX_LINE_BYTES} bytes, the limit of a table line"
                raise InputError(message, file=path, line=number)
            text = decode_utf8(raw, str(path), number)
            yield number, text.removeprefix("\ufeff") if number == 1 else text


def csv_rows(lines: Iterator[tuple[int, str]], path: Path) -> Iterator[tuple[int, str]]:
    """``lines`` of a CSV file, checking that a row whose quoted field spans lines stays
    within :data:`MAX_LINE_BYTES` too (an :class:`InputError` at the row's first line)."""
    start, size, quoted = 1, 0, False
    for number, text in lines:
        start, size = (start, size) if quoted else (number, 0)
        size += len(text)
        if size > MAX_LINE_BYTES:
            message = f"row longer than {MAX_LINE_BYTES} bytes, the limit of a table line"
            raise InputError(message, file=path, line=start)
        quoted = _still_quoted(text, quoted)
        yield number, text


def _still_quoted(text: str, quoted: bool) -> bool:
    """Whether a CSV line that starts inside a quoted field (``quoted``) ends inside one, read
    as pandas reads it: a quote opens a field only at its start (line start or after a comma;
    elsewhere it is a character), ``""`` inside one is a quote, a lone ``"`` closes it."""
    pos = text.find('"')
    while pos >= 0:
        if not quoted:
            quoted = pos == 0 or text[pos - 1] == ","
        elif text.startswith('""', pos):
            pos += 1
        else:
            quoted = False
        pos = text.find('"', pos + 1)
    return quoted


def read_csv(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The rows of a CSV file with Python's csv module, each with its (last) line, streamed
    within :data:`MAX_LINE_BYTES`; a malformed row (a field over the csv module's 131,072
    characters) is an :class:`InputError` at its line."""
    reader = csv.reader(text for _, text in csv_rows(read_lines(path), path))
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise InputError(f"malformed CSV: {err}", file=path, line=reader.line_num) from None
        yield reader.line_num, row


class LineStream(io.TextIOBase):
    """The lines of :func:`read_lines` as a text file to hand pandas: it never holds more than
    one chunk; ``first_data_line`` is the first non-blank line after the header seen so far."""

    def __init__(self, lines: Iterator[tuple[int, str]]) -> None:
        super().__init__()
        self._lines = lines
        self._buffer = ""
        self.first_data_line: int | None = None

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> str:
        parts = [self._buffer]
        have = len(self._buffer)
        while size is None or size < 0 or have < size:
            number, text = next(self._lines, (0, ""))
            if not text:
                break
            if self.first_data_line is None and number > 1 and text.strip():
                self.first_data_line = number
            parts.append(text)
            have += len(text)
        data = "".join(parts)
        cut = len(data) if size is None or size < 0 else size
        self._buffer = data[cut:]
        return data[:cut]


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)


def _too_deep(text: str) -> int | None:
    """The 1-based line where ``text`` (JSON) first nests deeper than :data:`MAX_JSON_DEPTH`."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return None
    import numpy as np  # only for JSON that could be deep; keeps this module light to import

    bare = _STRING.sub('""', text).encode("utf-8")
    codes = np.frombuffer(bare, np.uint8)
    opens = (codes == ord("[")) | (codes == ord("{"))
    closes = (codes == ord("]")) | (codes == ord("}"))
    depth = np.cumsum(opens.astype(np.int64) - closes)
    over = np.flatnonzero(depth > MAX_JSON_DEPTH)
    return None if over.size == 0 else bare.count(b"\n", 0, int(over[0])) + 1


def parse_json(text: str, file: str | Path, line: int = 1, hint: str = "") -> Any:
    """The JSON value of ``text`` (read from ``file``, starting at ``line``); invalid JSON,
    nesting deeper than :data:`MAX_JSON_DEPTH` and integers of more than 4,300 digits are an
    :class:`InputError` at their line (``hint`` appended to a syntax error)."""
    deep = _too_deep(text)
    if deep is not None:
        message = f"invalid JSON: nested too deeply (more than {MAX_JSON_DEPTH} levels)"
        raise InputError(message, file=file, line=line + deep - 1)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        at = line + err.lineno - 1
        raise InputError(f"invalid JSON: {err.msg}{hint}", file=file, line=at) from None
    except (ValueError, RecursionError) as err:  # an integer of > 4,300 digits
        raise InputError(f"invalid JSON: {err}", file=file, line=line) from None


def read_json_file(path: Path) -> tuple[Any, str]:
    """A JSON file's value and text, within :data:`MAX_DOCUMENT_BYTES` and
    :data:`MAX_JSON_DEPTH` (see :func:`parse_json`)."""
    text = read_text(path)
    return parse_json(text, path), text
