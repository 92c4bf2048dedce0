"""A measured run of a real serving engine: its requests, engine settings and load time series.

Every reader (:mod:`simkv.measured.read`) produces the same shape, :class:`MeasuredRun`, whose
``requests`` frame follows simkv's own conventions:

* one row per request, in arrival order (a stable sort of the file's rows by arrival time);
* ``arrival_s``: seconds from the first arrival, which is 0.0;
* ``ttft_s`` = first token − arrival and ``e2el_s`` = last token − arrival, in seconds;
* ``first_scheduled_s`` (when the format has it): first scheduling, on the ``arrival_s`` clock.

:func:`request_frame` builds that frame from a reader's raw columns and is the single place
where a measurement's values are checked; any bad value is an :class:`~simkv.errors.InputError`
naming the file, the line and the file's own field name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import get_args, get_type_hints

import numpy as np
import pandas as pd

from simkv.errors import InputError

REQUEST_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens", "ttft_s", "e2el_s")
TIMESERIES_COLUMNS = (
    "t_s", "running", "waiting", "kv_usage", "prompt_throughput", "gen_throughput",
)  # fmt: skip


@dataclass(frozen=True)
class EngineSettings:
    """What the measured engine ran with; None = not recorded by the measurement.

    ``model`` is the Hugging Face name, ``gpu`` the device name as the driver reports it,
    ``max_num_batched_tokens`` the token budget per step, ``block_size`` tokens per KV block,
    ``num_gpu_blocks`` the KV blocks the engine allocated, ``dtype``/``kv_cache_dtype`` the
    engine's spelling (e.g. ``bfloat16``, ``auto``), ``engine_version`` e.g. ``vllm 0.19.0``,
    ``reserve_full_prompt`` vLLM's ``scheduler_reserve_full_isl``, ``data_parallel`` the number
    of engines serving the run side by side (vLLM's ``data_parallel_size``) and
    ``expert_parallel`` whether their experts were sharded across them.
    """

    model: str | None = None
    gpu: str | None = None
    tensor_parallel: int | None = None
    data_parallel: int | None = None
    expert_parallel: bool | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    block_size: int | None = None
    num_gpu_blocks: int | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    reserve_full_prompt: bool | None = None
    dtype: str | None = None
    kv_cache_dtype: str | None = None
    engine_version: str | None = None

    @classmethod
    def field_types(cls) -> dict[str, type]:
        """Each field's value type (int, bool or str)."""
        hints = get_type_hints(cls)
        return {f.name: get_args(hints[f.name])[0] for f in fields(cls)}


@dataclass(frozen=True, eq=False)
class MeasuredRun:
    """One measurement, read by :func:`simkv.measured.read_measured_run`.

    Invariants (checked on construction, ValueError otherwise): ``requests`` has the columns
    ``arrival_s, prompt_tokens, output_tokens, ttft_s, e2el_s`` (optionally
    ``first_scheduled_s``), at least one row, ``arrival_s`` non-decreasing from 0.0,
    ``prompt_tokens`` ≥ 1 and ``output_tokens`` ≥ 1 (int64); ``ttft_s`` and ``e2el_s`` (float64, s)
    are NaN only where the format does not record them, and otherwise 0 ≤ ttft_s ≤ e2el_s.
    ``prompt_token_ids`` and ``itl_s`` (per-request inter-token gaps, s) have one int64 /
    float64 array per request row, in the same order; ``prompt_token_ids[i]`` holds
    ``prompt_tokens[i]`` ids.

    ``timeseries`` (None when not logged) has columns ``t_s`` (s, as the engine's logger counted
    them), ``running``, ``waiting`` (requests), ``kv_usage`` (fraction 0–1 of the KV blocks in
    use; NaN when not logged — a logger that writes 0.0 throughout did not log it, so an all-zero
    column is read as NaN), ``prompt_throughput``, ``gen_throughput`` (tokens/s).
    ``notes`` says what a reader assumed or left out (e.g. failed requests of a benchmark).
    """

    source: Path
    label: str
    requests: pd.DataFrame
    prompt_token_ids: tuple[np.ndarray, ...] | None = None
    engine: EngineSettings | None = None
    timeseries: pd.DataFrame | None = None
    itl_s: tuple[np.ndarray, ...] | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        req = self.requests
        missing = [c for c in REQUEST_COLUMNS if c not in req.columns]
        if missing or len(req) == 0:
            raise ValueError(f"requests needs ≥ 1 row and the columns {REQUEST_COLUMNS}")
        arrival = req["arrival_s"].to_numpy()
        if arrival[0] != 0.0 or np.any(np.diff(arrival) < 0):
            raise ValueError("arrival_s must start at 0.0 and be non-decreasing")
        if (req["prompt_tokens"] < 1).any() or (req["output_tokens"] < 1).any():
            raise ValueError("prompt_tokens and output_tokens must be ≥ 1")
        ttft, e2el = req["ttft_s"].to_numpy(), req["e2el_s"].to_numpy()
        if np.any(ttft < 0) or np.any(e2el < ttft):  # NaN compares False: not recorded
            raise ValueError("need 0 ≤ ttft_s ≤ e2el_s")
        for name, per_request in (("prompt_token_ids", self.prompt_token_ids),
                                  ("itl_s", self.itl_s)):  # fmt: skip
            if per_request is not None and len(per_request) != len(req):
                raise ValueError(f"{name} has {len(per_request)} entries for {len(req)} requests")
        if self.prompt_token_ids is not None:
            lengths = np.array([len(ids) for ids in self.prompt_token_ids], np.int64)
            if np.any(lengths != req["prompt_tokens"].to_numpy()):
                raise ValueError("prompt_token_ids[i] must hold prompt_tokens[i] ids")
        if self.timeseries is not None and list(self.timeseries.columns) != [*TIMESERIES_COLUMNS]:
            raise ValueError(f"timeseries must have the columns {TIMESERIES_COLUMNS}")

    def __len__(self) -> int:
        return len(self.requests)


@dataclass(frozen=True)
class RequestColumns:
    """A reader's per-request values in file order, before any check.

    Times are seconds on one clock of any origin: ``arrival_s`` absolute, ``ttft_s`` and
    ``e2el_s`` relative to arrival, ``first_scheduled_s`` absolute; None = not in the format.
    ``lines[i]`` is row i's file line (1-based) and ``names`` maps a column to the file's field
    that holds it, for error messages; ``list_index[i]`` (formats whose fields are per-request
    lists) is row i's position in those lists, and errors then name ``field[position]``.
    """

    file: Path
    lines: np.ndarray
    names: Mapping[str, str]
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    ttft_s: np.ndarray | None
    e2el_s: np.ndarray | None
    first_scheduled_s: np.ndarray | None = None
    list_index: np.ndarray | None = None

    def fail(self, row: int, column: str, message: str) -> InputError:
        """An error about row ``row`` (file order) and ``column`` (a simkv column name)."""
        field = self.names.get(column, column)
        if self.list_index is not None:
            field = f"{field}[{self.list_index[row]}]"
        return InputError(message, file=self.file, line=int(self.lines[row]), field=field)


def _first_bad(cols: RequestColumns, bad: np.ndarray, column: str, message: str) -> None:
    if bad.any():
        row = int(np.argmax(bad))
        raise cols.fail(row, column, message.format(row=row))


def _check(cols: RequestColumns) -> None:
    """Raise on the first row (file order) with a missing, zero or clock-skewed value."""
    n = len(cols.arrival_s)
    present = {name: getattr(cols, name) for name in (*REQUEST_COLUMNS, "first_scheduled_s")}
    for name, values in present.items():
        if values is not None:
            if len(values) != n:
                raise InputError(f"{len(values)} values for {n} requests", file=cols.file,
                                 field=cols.names.get(name, name))  # fmt: skip
            _first_bad(cols, ~np.isfinite(values), name, "missing or non-finite value")
    _first_bad(cols, cols.prompt_tokens < 1, "prompt_tokens", "a prompt holds ≥ 1 token")
    _first_bad(cols, cols.output_tokens < 1, "output_tokens",
               "zero output tokens: a measured request must generate ≥ 1 token")  # fmt: skip
    ttft, e2el, sched = cols.ttft_s, cols.e2el_s, cols.first_scheduled_s
    if ttft is not None:
        _first_bad(cols, ttft < 0, "ttft_s", "clock skew: first token before arrival")
    if ttft is not None and e2el is not None:
        _first_bad(cols, e2el < ttft, "e2el_s", "clock skew: last token before first token")
    elif e2el is not None:
        _first_bad(cols, e2el < 0, "e2el_s", "clock skew: last token before arrival")
    if sched is not None:
        _first_bad(cols, sched < cols.arrival_s, "first_scheduled_s",
                   "clock skew: scheduled before arrival")  # fmt: skip
        if ttft is not None:
            late = sched > cols.arrival_s + ttft
            _first_bad(cols, late, "first_scheduled_s", "clock skew: scheduled after first token")


def request_frame(cols: RequestColumns) -> tuple[pd.DataFrame, np.ndarray]:
    """The checked ``requests`` frame of a run and its row order (file rows, arrival order).

    Raises :class:`InputError` (file, line, field) for an empty measurement, a missing or
    non-finite value, a prompt or output of 0 tokens, and clock skew: a first token before
    arrival, a last token before the first, a scheduling before arrival or after the first token.
    """
    if len(cols.arrival_s) == 0:
        raise InputError("empty measurement: no requests", file=cols.file)
    _check(cols)
    order = np.argsort(cols.arrival_s, kind="stable")
    start = float(cols.arrival_s[order[0]])
    n = len(order)
    nan = np.full(n, np.nan)
    frame = pd.DataFrame(
        {
            "arrival_s": cols.arrival_s[order] - start,
            "prompt_tokens": cols.prompt_tokens[order].astype(np.int64),
            "output_tokens": cols.output_tokens[order].astype(np.int64),
            "ttft_s": nan if cols.ttft_s is None else cols.ttft_s[order].astype(np.float64),
            "e2el_s": nan if cols.e2el_s is None else cols.e2el_s[order].astype(np.float64),
        }
    )
    if cols.first_scheduled_s is not None:
        frame["first_scheduled_s"] = cols.first_scheduled_s[order] - start
    return frame, order
