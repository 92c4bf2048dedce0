"""The generic measurement format: a CSV (or JSONL) with one row per request.

Columns (header names, any order, other columns ignored):

============================  ======================================================
``arrival_s``                 arrival time, s (any origin; re-based to the first arrival)
``prompt_tokens``             prompt length, tokens (integer ≥ 1)
``output_tokens``             generated tokens (integer ≥ 1)
``ttft_s``                    first token − arrival, s
``e2el_s``                    last token − arrival, s
``first_scheduled_s``         optional: first scheduling, s, on the ``arrival_s`` clock
============================  ======================================================

:func:`write_generic_csv` writes a :class:`~simkv.measured.runs.MeasuredRun`'s requests in this
format (exactly: floats are written with full precision), so any measurement can be shared as one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simkv.config.limits import MAX_TOKENS
from simkv.errors import InputError
from simkv.measured.runs import REQUEST_COLUMNS, MeasuredRun, RequestColumns, request_frame
from simkv.tables import Table, read_table

OPTIONAL_COLUMNS = ("first_scheduled_s",)


def _check_header(table: Table) -> None:
    missing = [name for name in REQUEST_COLUMNS if not table.has(name)]
    if missing:
        found = ", ".join(map(str, table.frame.columns))
        raise InputError(
            f"unknown measurement format: expected the columns {', '.join(REQUEST_COLUMNS)} "
            f"[, first_scheduled_s]; found: {found}",
            file=table.path, line=table.header_line, field=missing[0],
        )  # fmt: skip


def read_generic(path: Path) -> MeasuredRun:
    """Read a generic measurement CSV/JSONL (see the module docstring)."""
    table = read_table(path)
    _check_header(table)

    def seconds(name: str) -> np.ndarray:
        return table.numbers(name, minimum=-np.inf, integer=False)

    sched = seconds("first_scheduled_s") if table.has("first_scheduled_s") else None
    cols = RequestColumns(
        table.path, table.lines, {}, seconds("arrival_s"),
        table.ints("prompt_tokens", minimum=0, maximum=MAX_TOKENS),
        table.ints("output_tokens", minimum=0, maximum=MAX_TOKENS),
        seconds("ttft_s"), seconds("e2el_s"), sched,
    )  # fmt: skip
    frame, _ = request_frame(cols)
    return MeasuredRun(path, path.stem, frame)


def write_generic_csv(run: MeasuredRun, path: Path) -> Path:
    """Write ``run.requests`` as a generic measurement CSV; returns ``path``."""
    columns = [c for c in (*REQUEST_COLUMNS, *OPTIONAL_COLUMNS) if c in run.requests.columns]
    run.requests[columns].to_csv(path, index=False, float_format="%.17g")
    return path
