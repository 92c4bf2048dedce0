"""User files as tables, every problem located: the one table reader of traces, measured runs
and profiles (:mod:`simkv.workload.traces`, :mod:`simkv.measured`).

:func:`read_table` gives CSV or JSONL rows with their file lines (streamed by
:func:`simkv.text.read_lines`, within its line limit). Every bad value is reported as
:class:`simkv.errors.InputError` with ``file:line column`` (line = 1-based physical line of
the file; a CSV header is line 1).
A ground module: it imports only :mod:`simkv.errors` and :mod:`simkv.text`, so every layer may
read files through it.
"""

from __future__ import annotations

import itertools
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from simkv.errors import InputError
from simkv.text import LineStream, csv_rows, parse_json, read_lines


def _bound(limit: float) -> str:
    """A bound as written: 2147483648, not 2.14748e+09."""
    return f"{limit:.0f}" if np.isfinite(limit) and limit == int(limit) else f"{limit:g}"


def value_problem(value: object, minimum: float, integer: bool, maximum: float = np.inf) -> str:
    """Why one raw cell is not a number in [``minimum``, ``maximum``] (integral if ``integer``)."""
    if isinstance(value, bool | np.bool_):
        return f"not a number: {value}"
    if value is None or (isinstance(value, float) and np.isnan(value)) or str(value).strip() == "":
        return "missing value"
    shown = repr(value) if isinstance(value, str) else str(getattr(value, "item", lambda: value)())
    try:
        number = float(value)  # type: ignore[arg-type]
    except OverflowError:
        return f"must be ≤ {_bound(maximum)}, got a number of {len(str(value))} digits"
    except (TypeError, ValueError):
        return f"not a number: {shown[:40]}"
    if not np.isfinite(number):
        return f"not a finite number: {shown}"
    if integer and number != int(number):
        return f"not an integer: {shown}"
    if number > maximum:
        return f"must be ≤ {_bound(maximum)}, got {shown}"
    return f"must be ≥ {_bound(minimum)}, got {shown}"


def _float_or_nan(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return np.nan


def _floats(raw: pd.Series) -> np.ndarray:
    """A column as float64, NaN where a cell is not a number (an integer too large for a
    float included, which pandas refuses with OverflowError)."""
    try:
        return pd.to_numeric(raw, errors="coerce").to_numpy(np.float64, na_value=np.nan)
    except (OverflowError, TypeError, ValueError):
        return np.array([_float_or_nan(v) for v in raw], dtype=np.float64)


@dataclass(frozen=True)
class Table:
    """Raw rows of a CSV/JSONL file without blank lines; ``lines[i]`` is row i's file line."""

    path: Path
    frame: pd.DataFrame
    lines: np.ndarray
    header_line: int

    def has(self, *names: str) -> bool:
        return all(name in self.frame.columns for name in names)

    def fail(self, row: int, column: str, message: str) -> InputError:
        return InputError(message, file=self.path, line=int(self.lines[row]), field=column)

    def column(self, name: str) -> pd.Series:
        if name not in self.frame.columns:
            found = ", ".join(map(str, self.frame.columns))
            message = f"missing column {name!r} (columns found: {found})"
            raise InputError(message, file=self.path, line=self.header_line, field=name)
        return self.frame[name]

    def numbers(
        self, name: str, *, minimum: float, integer: bool, maximum: float = np.inf
    ) -> np.ndarray:
        """Column ``name`` as float64, every value finite, in [minimum, maximum] (and
        integral); a boolean (``true`` in CSV or JSON) is not a number."""
        raw = self.column(name)
        is_bool = raw.map(lambda v: isinstance(v, bool | np.bool_)).to_numpy(bool)
        numeric = raw.where(~is_bool, np.nan) if is_bool.any() else raw
        values = _floats(numeric)
        bad = ~np.isfinite(values) | (values < minimum) | (values > maximum) | is_bool
        if integer:
            bad |= values != np.floor(values)
        if bad.any():
            row = int(np.argmax(bad))
            problem = value_problem(raw.iloc[row], minimum, integer, maximum)
            raise self.fail(row, name, problem)
        return values

    def ints(self, name: str, minimum: int = 1, *, maximum: float) -> np.ndarray:
        """Column ``name`` as int64 in [minimum, maximum] (a token count's ``maximum`` is
        :data:`simkv.config.limits.MAX_TOKENS`)."""
        values = self.numbers(name, minimum=minimum, integer=True, maximum=maximum)
        return values.astype(np.int64)


def _parse_csv(path: Path, stream: LineStream) -> pd.DataFrame:
    try:
        with warnings.catch_warnings():
            # pandas only warns (and drops data) when the first row has more fields than the header
            warnings.simplefilter("error", pd.errors.ParserWarning)
            return pd.read_csv(stream, skip_blank_lines=False, index_col=False)
    except pd.errors.EmptyDataError:
        raise InputError("empty trace: no header and no requests", file=path) from None
    except pd.errors.ParserWarning:
        message = "malformed CSV: more fields than the header"
        raise InputError(message, file=path, line=stream.first_data_line or 2) from None
    except pd.errors.ParserError as err:
        found = re.search(r"line (\d+)", str(err))
        line = int(found.group(1)) if found else None
        raise InputError(f"malformed CSV: {err}".strip(), file=path, line=line) from None


def _csv_table(path: Path, lines: Iterator[tuple[int, str]]) -> Table:
    frame = _parse_csv(path, LineStream(lines))
    frame.columns = [str(c).strip() for c in frame.columns]
    empty = frame.isna()
    for name in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[name]):
            empty[name] |= frame[name].astype(str).str.strip().eq("")
    keep = ~empty.all(axis=1).to_numpy()
    rows = np.flatnonzero(keep) + 2
    return Table(path, frame[keep].reset_index(drop=True), rows, header_line=1)


def _jsonl_table(path: Path, lines: Iterator[tuple[int, str]]) -> Table:
    records: list[dict] = []
    numbers: list[int] = []
    for number, line in lines:
        if not line.strip():
            continue
        record = parse_json(line, path, number)
        if not isinstance(record, dict):
            raise InputError("expected a JSON object per line", file=path, line=number)
        records.append(record)
        numbers.append(number)
    first = numbers[0] if numbers else 1
    return Table(path, pd.DataFrame(records), np.asarray(numbers, np.int64), header_line=first)


def read_table(path: Path) -> Table:
    """A CSV or JSONL file (JSONL if its first non-blank character is ``{``), ≥ 1 row, read
    line by line within :data:`simkv.text.MAX_LINE_BYTES`."""
    lines = read_lines(path)
    head = []
    for item in lines:
        head.append(item)
        if item[1].strip():
            break
    is_jsonl = head[-1][1].lstrip().startswith("{") if head else False
    rest = itertools.chain(head, lines)
    table = _jsonl_table(path, rest) if is_jsonl else _csv_table(path, csv_rows(rest, path))
    if len(table.frame) == 0:
        raise InputError("empty trace: no requests", file=path)
    return table
