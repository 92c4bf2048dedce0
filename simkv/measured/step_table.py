"""simkv's step-time CSV (``cost_model: {kind: table, path: steps.csv}``), read and checked into
a typed :class:`StepTimeTable`.

The format is :class:`simkv.config.cost.TableCostConfig`'s: a header row, the columns
``num_tokens``, ``step_time_ms`` and optionally ``kv_read_tokens``, no other columns; with
``kv_read_tokens`` the rows cover a full grid. Every problem is an
:class:`~simkv.errors.InputError` with the file, line and field.
:class:`simkv.engine.table_cost.TableCostModel` interpolates the table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from simkv.errors import InputError
from simkv.text import read_csv

__all__ = ["StepTimeTable", "read_step_table"]


_TOKENS, _KV, _TIME = "num_tokens", "kv_read_tokens", "step_time_ms"


@dataclass(frozen=True, slots=True)
class StepTimeTable:
    """Measured step times on a grid: ``times_ms[j][i]`` at ``(num_tokens[i], kv_read[j])``.

    Invariants: both axes strictly increasing and non-empty; every time positive. A table
    without a ``kv_read_tokens`` column has the single kv axis value 0 (the axis is then inert).
    """

    num_tokens: tuple[float, ...]
    kv_read_tokens: tuple[float, ...]
    times_ms: tuple[tuple[float, ...], ...]


def _number(text: str, column: str, where: tuple[Path, int]) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    ok = math.isfinite(value) and (value > 0 if column == _TIME else value >= 0)
    if not ok:
        want = "a positive number" if column == _TIME else "a non-negative number"
        raise InputError(
            f"expected {want}, got {text!r}", file=where[0], line=where[1], field=column
        )
    return value


def _header(row: list[str], path: Path) -> list[str]:
    names = [name.strip() for name in row]
    for i, name in enumerate(names):
        if name not in (_TOKENS, _KV, _TIME):
            raise InputError("unknown column", file=path, line=1, field=name or "''")
        if name in names[:i]:
            raise InputError("duplicate column", file=path, line=1, field=name)
    for name in (_TOKENS, _TIME):
        if name not in names:
            raise InputError("missing column", file=path, line=1, field=name)
    return names


def _read_points(path: Path) -> dict[tuple[float, float], float]:
    """``{(num_tokens, kv_read_tokens): step_time_ms}``; kv_read_tokens is 0 without its column."""
    reader = read_csv(path)
    names = _header(next(reader, (1, []))[1], path)
    points: dict[tuple[float, float], float] = {}
    for line, row in reader:
        if not any(cell.strip() for cell in row):
            continue
        where = (path, line)
        if len(row) != len(names):
            raise InputError(f"expected {len(names)} fields, got {len(row)}", file=path, line=line)
        values = {n: _number(c.strip(), n, where) for n, c in zip(names, row, strict=True)}
        key = (values[_TOKENS], values.get(_KV, 0.0))
        if key in points:
            message = f"duplicate row for num_tokens={key[0]:g}, kv_read_tokens={key[1]:g}"
            raise InputError(message, file=path, line=where[1], field=_TOKENS)
        points[key] = values[_TIME]
    if not points:
        raise InputError("no data rows", file=path, line=1)
    return points


def read_step_table(path: Path) -> StepTimeTable:
    """Parse a step-time CSV (format in ``TableCostConfig``); problems are :class:`InputError`."""
    points = _read_points(path)
    ns = tuple(sorted({n for n, _ in points}))
    ks = tuple(sorted({k for _, k in points}))
    for k in ks:
        for n in ns:
            if (n, k) not in points:
                raise InputError(
                    f"incomplete grid: no row for num_tokens={n:g} with kv_read_tokens={k:g}",
                    file=path,
                    field=_KV,
                )
    times = tuple(tuple(points[(n, k)] for n in ns) for k in ks)
    return StepTimeTable(num_tokens=ns, kv_read_tokens=ks, times_ms=times)
