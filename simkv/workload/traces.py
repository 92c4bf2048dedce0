"""Trace readers: Azure LLM inference CSV, Mooncake and Qwen-Bailian JSONL, lengths-only CSV,
generic CSV/JSONL.

Files are parsed with vectorised pandas/numpy; when a value is bad, the first bad row is located
and reported as :class:`simkv.errors.InputError` with ``file:line column`` (line = 1-based
physical line of the file; a CSV header is line 1). Rows are sorted by arrival, stably.
Arrival times are seconds: Azure wall-clock stamps become offsets from the earliest stamp;
Mooncake (ms) and generic arrival columns are kept as relative times, not re-based.

A Mooncake or Qwen-Bailian trace with a ``hash_ids`` column also gives prompt
content (:class:`~simkv.workload.content.PromptContent`, :mod:`simkv.workload.hash_ids`): one
segment per hash id, 512 (Mooncake) or 16 (Bailian) tokens each but the last, which holds the
remainder. A Mooncake row must therefore have exactly ``ceil(input_length / 512)`` ids (true of
every row of the published traces), each an integer ≥ 0; output ids are ``max hash id + 1 + i``
for request ``i``. Bailian timestamps are seconds; its session fields (``chat_id``,
``parent_chat_id``, ``turn``, ``type``) are not used: requests replay at their timestamps.
Without a ``hash_ids`` column, and for other formats, ``content`` is None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from simkv.config.limits import MAX_ARRIVAL_S, MAX_PRIORITY, MAX_TOKENS, MIN_PRIORITY
from simkv.errors import InputError
from simkv.tables import Table, read_table
from simkv.workload.hash_ids import (
    BAILIAN_BLOCK_TOKENS,
    MOONCAKE_BLOCK_TOKENS,
    check_hash_counts,
    hash_id_content,
    hash_id_lists,
)
from simkv.workload.request import Workload

TraceFormat = Literal["auto", "azure", "mooncake", "bailian", "lengths", "generic"]
#: ``n -> arrival_s`` (n non-decreasing times) for traces read without timestamps.
ArrivalSampler = Callable[[int], np.ndarray]

AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MOONCAKE = ("timestamp", "input_length", "output_length")
BAILIAN = ("chat_id", "parent_chat_id", *MOONCAKE)
SHAREGPT = ("num_prefill_tokens", "num_decode_tokens")
GENERIC = ("prompt_tokens", "output_tokens")
_KNOWN = (
    f"Azure ({', '.join(AZURE)}), Mooncake ({', '.join(MOONCAKE)}), Qwen-Bailian "
    f"({', '.join(BAILIAN)}), "
    f"ShareGPT lengths ({', '.join(SHAREGPT)}) or generic ({', '.join(GENERIC)})"
)
#: Years an Azure ``TIMESTAMP`` may lie in: pandas' nanosecond timestamps end in 1677 and 2262.
AZURE_YEARS = (1678, 2261)


@dataclass(frozen=True)
class ColumnMap:
    """Which file column holds each request field of a generic trace.

    At most one of ``arrival_s`` (seconds) and ``arrival_ms`` (milliseconds); neither means the
    trace has no timestamps. ``priority`` None means every request has priority 0.
    """

    prompt_tokens: str
    output_tokens: str
    arrival_s: str | None
    arrival_ms: str | None
    priority: str | None


@dataclass(frozen=True)
class LengthsTable:
    """Token lengths of a trace in file order; ``output_tokens`` is 0 for single-length files."""

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str

    @property
    def total_tokens(self) -> np.ndarray:
        """prompt + output tokens per request (int64)."""
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class _Rows:
    """Parsed request fields in file order; ``arrival_s`` None = the trace has no timestamps."""

    arrival_s: np.ndarray | None
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    priority: np.ndarray | None = None
    hash_ids: list[np.ndarray] | None = None
    block_tokens: int = MOONCAKE_BLOCK_TOKENS


def _azure_seconds(table: Table) -> np.ndarray:
    """Seconds since the earliest ``TIMESTAMP``: ISO 8601 stamps (UTC offsets converted) in
    years :data:`AZURE_YEARS` (nanosecond timestamps), at most ``MAX_ARRIVAL_S`` apart."""
    raw = table.column("TIMESTAMP")
    try:
        stamps = pd.to_datetime(raw.astype(str), format="ISO8601", errors="coerce")
    except ValueError:  # pandas refuses a column mixing UTC offsets unless utc=True
        stamps = pd.to_datetime(raw.astype(str), format="ISO8601", errors="coerce", utc=True)
    first, last = AZURE_YEARS
    years = stamps.dt.year.to_numpy(np.float64, na_value=np.nan)
    bad = ~((years >= first) & (years <= last))
    if bad.any():
        row = int(np.argmax(bad))
        message = f"unparsable timestamp {raw.iloc[row]!r} (ISO 8601, years {first}..{last})"
        raise table.fail(row, "TIMESTAMP", message)
    if getattr(stamps.dt, "tz", None) is not None:
        stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
    ns = stamps.astype("datetime64[ns]").to_numpy().view(np.int64)
    late = (ns.astype(np.float64) - float(ns.min())) / 1e9 > MAX_ARRIVAL_S
    if late.any():
        row = int(np.argmax(late))
        message = f"{raw.iloc[row]!r} is more than {MAX_ARRIVAL_S:g} s after the earliest stamp"
        raise table.fail(row, "TIMESTAMP", message)
    return (ns - ns.min()) / 1e9


def _azure(table: Table, columns: ColumnMap | None) -> _Rows:
    prompt = table.ints("ContextTokens", maximum=MAX_TOKENS)
    return _Rows(_azure_seconds(table), prompt, table.ints("GeneratedTokens", maximum=MAX_TOKENS))


def _seconds(table: Table, name: str, per_s: float = 1.0) -> np.ndarray:
    """Column ``name`` of times in units of 1/``per_s`` s, as seconds in [0, MAX_ARRIVAL_S]."""
    return table.numbers(name, minimum=0, integer=False, maximum=MAX_ARRIVAL_S * per_s) / per_s


def _hashed(table: Table, per_s: float, block_tokens: int, *, full: bool) -> _Rows:
    """A trace of ``timestamp`` (in 1/``per_s`` s), ``input_length``, ``output_length`` and,
    optionally, ``hash_ids`` of ``block_tokens``-token blocks (checked by
    :func:`check_hash_counts`, ``full`` as there)."""
    arrival_s = _seconds(table, "timestamp", per_s=per_s)
    prompt = table.ints("input_length", maximum=MAX_TOKENS)
    output = table.ints("output_length", maximum=MAX_TOKENS)
    hash_ids = None
    if table.has("hash_ids"):
        hash_ids = hash_id_lists(table)
        check_hash_counts(table, hash_ids, prompt, block_tokens, full=full)
    return _Rows(arrival_s, prompt, output, hash_ids=hash_ids, block_tokens=block_tokens)


def _mooncake(table: Table, columns: ColumnMap | None) -> _Rows:
    """Mooncake FAST'25 traces: ``timestamp`` in ms, 512-token ``hash_ids``, one per block."""
    return _hashed(table, 1000.0, MOONCAKE_BLOCK_TOKENS, full=False)


def _bailian(table: Table, columns: ColumnMap | None) -> _Rows:
    """Qwen-Bailian usage traces: ``timestamp`` in seconds, 16-token ``hash_ids``."""
    return _hashed(table, 1.0, BAILIAN_BLOCK_TOKENS, full=True)


def _lengths(table: Table, columns: ColumnMap | None) -> _Rows:
    prompt = table.ints("num_prefill_tokens", maximum=MAX_TOKENS)
    return _Rows(None, prompt, table.ints("num_decode_tokens", maximum=MAX_TOKENS))


def _default_map(table: Table) -> ColumnMap:
    """Generic columns by their simkv names; a clear error when none of the formats fits."""
    if not table.has(*GENERIC):
        found = ", ".join(map(str, table.frame.columns))
        message = f"unknown trace format: expected {_KNOWN} columns; found: {found}"
        raise InputError(message, file=table.path, line=table.header_line)
    arrival_s = "arrival_s" if table.has("arrival_s") else None
    arrival_ms = "arrival_ms" if table.has("arrival_ms") and arrival_s is None else None
    priority = "priority" if table.has("priority") else None
    return ColumnMap(*GENERIC, arrival_s=arrival_s, arrival_ms=arrival_ms, priority=priority)


def _generic(table: Table, columns: ColumnMap | None) -> _Rows:
    cols = columns or _default_map(table)
    arrival_s = None
    if cols.arrival_s is not None:
        arrival_s = _seconds(table, cols.arrival_s)
    elif cols.arrival_ms is not None:
        arrival_s = _seconds(table, cols.arrival_ms, per_s=1000.0)
    priority = None
    if cols.priority is not None:
        priority = table.ints(cols.priority, minimum=MIN_PRIORITY, maximum=MAX_PRIORITY)
    prompt = table.ints(cols.prompt_tokens, maximum=MAX_TOKENS)
    output = table.ints(cols.output_tokens, maximum=MAX_TOKENS)
    return _Rows(arrival_s, prompt, output, priority)


_PARSERS: dict[str, Callable[[Table, ColumnMap | None], _Rows]] = {
    "azure": _azure,
    "mooncake": _mooncake,
    "bailian": _bailian,
    "lengths": _lengths,
    "generic": _generic,
}


def _detect_format(table: Table) -> str:
    """The format whose columns the table has: azure, bailian, mooncake, lengths, else
    generic."""
    formats = (
        ("azure", AZURE),
        ("bailian", BAILIAN),
        ("mooncake", MOONCAKE),
        ("lengths", SHAREGPT),
    )
    for name, needed in formats:
        if table.has(*needed):
            return name
    return "generic"


def _sorted_workload(rows: _Rows, arrival: ArrivalSampler | None, table: Table) -> Workload:
    n = len(rows.prompt_tokens)
    order = np.arange(n) if rows.arrival_s is None else np.argsort(rows.arrival_s, kind="stable")
    if arrival is not None:
        arrival_s = np.asarray(arrival(n), dtype=np.float64)
    elif rows.arrival_s is not None:
        arrival_s = rows.arrival_s[order]
    else:
        message = "trace has no timestamps (lengths only): set the workload's arrival process"
        raise InputError(message, file=table.path, field="arrival")
    priority = np.zeros(n, np.int64) if rows.priority is None else rows.priority[order]
    prompt = rows.prompt_tokens[order]
    content = None
    if rows.hash_ids is not None:
        content = hash_id_content([rows.hash_ids[i] for i in order], prompt, rows.block_tokens)
    return Workload(
        arrival_s,
        prompt,
        rows.output_tokens[order],
        priority,
        f"trace {table.path.name}",
        content,
    )


def _with_options(
    workload: Workload,
    path: Path,
    *,
    time_scale: float,
    rate: float | None,
    limit: int | None,
    start_s: float | None,
    end_s: float | None,
) -> Workload:
    """Window [start_s, end_s) re-based to 0, then first ``limit``, then time scaling."""
    if start_s is not None or end_s is not None:
        workload = workload.between(start_s, end_s)
    if limit is not None:
        workload = workload.take(limit)
    if len(workload) == 0:
        raise InputError("no requests left after the window/limit options", file=path)
    if time_scale != 1.0:
        workload = workload.time_scaled(time_scale)
    if rate is not None:
        observed = workload.mean_rate_per_s
        if observed is None:
            message = "cannot rescale to a rate: needs ≥ 2 requests at distinct times"
            raise InputError(message, file=path, field="rate")
        workload = workload.time_scaled(observed / rate)
    return workload


def read_trace(
    path: Path,
    *,
    format: TraceFormat = "auto",
    columns: ColumnMap | None = None,
    arrival: ArrivalSampler | None = None,
    time_scale: float = 1.0,
    rate: float | None = None,
    limit: int | None = None,
    start_s: float | None = None,
    end_s: float | None = None,
) -> Workload:
    """Read a trace file into a :class:`Workload` sorted (stably) by arrival.

    ``format="auto"`` picks the format from the header/keys (see :func:`_detect_format`), or
    generic when ``columns`` is given; ``columns`` maps a generic trace's columns (None =
    simkv's own column names). ``arrival``,
    when given, replaces the trace's timestamps after sorting (required when it has none).
    Options apply in this order: window ``[start_s, end_s)`` in trace seconds, re-based so
    ``start_s`` is 0; the first ``limit`` requests; ``time_scale`` multiplies every arrival
    time; ``rate`` rescales times so that (n - 1) / (last - first arrival) equals it.
    Raises :class:`simkv.errors.InputError` for any bad input.
    """
    table = read_table(Path(path))
    chosen = format
    if format == "auto":
        chosen = "generic" if columns is not None else _detect_format(table)
    rows = _PARSERS[chosen](table, columns)
    workload = _sorted_workload(rows, arrival, table)
    return _with_options(
        workload,
        table.path,
        time_scale=time_scale,
        rate=rate,
        limit=limit,
        start_s=start_s,
        end_s=end_s,
    )


def read_column(path: Path, column: str) -> np.ndarray:
    """One column of a CSV/JSONL file as int64 values ≥ 1, in file order."""
    return read_table(Path(path)).ints(column, maximum=MAX_TOKENS)


def read_lengths(path: Path, *, column: str | None = None) -> LengthsTable:
    """Prompt and output lengths of a trace, in file order, without arrival times.

    With ``column``: that column (ints ≥ 1) is the prompt length and outputs are 0. Otherwise
    the pair of an Azure, Mooncake, ShareGPT or generic trace (prompt ≥ 1, output ≥ 0), else a
    ``length`` column as with ``column="length"``.
    """
    table = read_table(Path(path))
    pairs = (AZURE[1:], MOONCAKE[1:], SHAREGPT, GENERIC)
    pair = next((p for p in pairs if column is None and table.has(*p)), None)
    if pair is not None:
        prompt = table.ints(pair[0], maximum=MAX_TOKENS)
        output = table.ints(pair[1], minimum=0, maximum=MAX_TOKENS)
    else:
        prompt = table.ints(column or "length", maximum=MAX_TOKENS)
        output = np.zeros(len(prompt), np.int64)
    return LengthsTable(prompt, output, f"lengths of {table.path.name}")


def read_mooncake_hash_ids(path: Path) -> list[np.ndarray]:
    """Per-request prefix block hash ids (int64) of a Mooncake trace.

    Ordered like ``read_trace(path)`` (stable sort by timestamp), so entry i belongs to request i
    of that workload before any window/limit option.
    """
    table = read_table(Path(path))
    arrival_ms = table.numbers("timestamp", minimum=0, integer=False, maximum=1000 * MAX_ARRIVAL_S)
    ids = hash_id_lists(table)
    return [ids[row] for row in np.argsort(arrival_ms, kind="stable")]
