"""Append-only columnar recording during a run; DataFrames are built once, at the end.

Four tables come out of a run:

* ``requests`` — one row per request that left the system (finished, rejected or aborted);
  ``num_seqs`` is its sequence count (``n`` of a multi-sequence request, else 1) and
  ``generated_tokens`` counts the tokens of all its sequences.
* ``steps`` — one row per engine step (one batched forward pass); ``batch_size`` counts
  sequences, ``fork_blocks`` / ``fork_blocks_independent`` are the distinct blocks of forked
  multi-sequence requests and the blocks their sequences would hold unshared.
* ``itl`` — inter-token latencies as weighted samples ``(itl_s, count)``: every decoding
  request in a step whose previous token came at the end of the previous step shares one gap,
  so a step adds one row for all of them plus one row per request that had stalled. No
  per-token objects are ever created.
* ``preemptions`` — one row per preemption (:data:`PREEMPTION_COLUMNS`, in the order they
  happened): the request, when it was preempted (``time_s``, the start of the step that
  preempted it), ``kind`` (``recompute`` or ``swap``), when it was scheduled again
  (``resumed_s``: re-admitted or swapped in) and when it next sampled a token
  (``next_token_s``: the end of its recompute prefill, or of the step it was swapped in);
  NaN for "never" (it left, the run ended, or it was preempted again first). A row is
  appended at the preemption and its two times filled in later, so a run without
  preemptions records nothing.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass
from inspect import signature
from typing import NamedTuple

import numpy as np
import pandas as pd

STEP_COLUMNS: tuple[str, ...] = (
    "time_s",
    "duration_s",
    "prefill_tokens",
    "decode_tokens",
    "batch_size",
    "num_waiting",
    "num_running",
    "num_swapped",
    "blocks_used",
    "blocks_free",
    "token_slots",
    "reserved_slots",
    "internal_frag_slots",
    "external_frag_slots",
    "free_slots",
    "cpu_blocks_used",
    "preempted",
    "swap_out_blocks",
    "swap_in_blocks",
    "copy_blocks",
    "cache_hit_tokens",
    "cached_blocks",
    "shared_slots",
    "evictions",
    "fork_blocks",
    "fork_blocks_independent",
)


PREEMPTION_COLUMNS = ("req_id", "time_s", "kind", "resumed_s", "next_token_s")
PREEMPTION_KINDS = ("recompute", "swap")
"""A preemption's ``kind``: the request's KV dropped (recomputed when it is scheduled again)
or swapped out to the CPU (swapped in again)."""


class StepState(NamedTuple):
    """What a step row records of the scheduler after the step
    (:meth:`~simkv.engine.scheduler.SchedulerBase.step_state`): its queues, then its KV
    memory's ``memory_row``, then its forked groups."""

    num_waiting: int
    num_running: int
    num_swapped: int
    blocks_used: int  # (slots for contiguous memory)
    blocks_free: int
    token_slots: int
    reserved_slots: int
    internal_frag_slots: int
    external_frag_slots: int
    free_slots: int
    cpu_blocks_used: int
    cached_blocks: int
    shared_slots: int
    evictions: int
    fork_blocks: int
    fork_blocks_independent: int


STEP_STATE_COLUMNS: tuple[str, ...] = StepState._fields


@dataclass(frozen=True)
class RunFrames:
    """The frames of one run, in simkv's column names (vLLM benchmark names where one exists)."""

    requests: pd.DataFrame
    steps: pd.DataFrame
    itl: pd.DataFrame
    preemptions: pd.DataFrame | None = None
    """One row per preemption (:data:`PREEMPTION_COLUMNS`); None: not recorded (frames read
    from a run folder written before simkv recorded them)."""
    tiers: pd.DataFrame | None = None
    """Each KV offload tier's blocks in use after every store (``time_s``, ``tier``,
    ``blocks``); None: a run without tiers (:mod:`simkv.metrics.tiers`)."""


_FLOAT_REQ = ("arrival_s", "first_scheduled_s", "first_token_s", "finish_s")
_INT_REQ = (
    "req_id", "prompt_tokens", "output_tokens", "generated_tokens", "num_seqs", "truncated",
    "priority", "preemptions", "swaps", "swapped_bytes", "recomputed_tokens",
    "prefix_hit_tokens", "cache_hit_tokens",
)  # fmt: skip
_NAN = float("nan")
_REQ_ROW = struct.Struct("<" + "d" * len(_FLOAT_REQ) + "q" * len(_INT_REQ))
_REQ_DTYPE = np.dtype([(name, "<f8") for name in _FLOAT_REQ] + [(name, "<i8") for name in _INT_REQ])


class Recorder:
    """Collects per-request, per-step and inter-token-latency columns for one run.

    Requests and steps are packed rows in byte buffers (8 bytes a value, no Python object per
    value), so a million-request run records in a few hundred MB; ``None`` times are NaN.
    """

    def __init__(self) -> None:
        self._requests = bytearray()  # packed rows, _REQ_ROW.size bytes per request
        self._done_ids = array("q")
        self._status: list[str] = []
        self._reason: list[str] = []
        self._steps = bytearray()  # packed rows, _STEP_ROW.size bytes per step
        self._itl_s = array("d")
        self._itl_count = array("q")
        self._preempted_id = array("q")  # a row per preemption (PREEMPTION_COLUMNS)
        self._preempted_s = array("d")
        self._preempted_swap = array("b")
        self._resumed_s = array("d")  # NaN until filled in by resumed()
        self._next_token_s = array("d")  # NaN until filled in by next_token()

    def request_done(
        self, req_id: int, arrival_s: float, first_scheduled_s: float | None,
        first_token_s: float | None, finish_s: float | None, prompt_tokens: int,
        output_tokens: int, generated_tokens: int, num_seqs: int, truncated: bool,
        priority: int, preemptions: int, swaps: int, swapped_bytes: int,
        recomputed_tokens: int, prefix_hit_tokens: int, cache_hit_tokens: int, status: str,
        reason: str,
    ) -> None:  # fmt: skip
        """Record a request that left the system (finished, rejected or aborted); ``None``
        times are "never" (NaN in the frame)."""
        self._requests += _REQ_ROW.pack(
            arrival_s,
            _NAN if first_scheduled_s is None else first_scheduled_s,
            _NAN if first_token_s is None else first_token_s,
            _NAN if finish_s is None else finish_s,
            req_id, prompt_tokens, output_tokens, generated_tokens, num_seqs, truncated,
            priority, preemptions, swaps, swapped_bytes, recomputed_tokens, prefix_hit_tokens,
            cache_hit_tokens,
        )  # fmt: skip
        self._done_ids.append(req_id)
        self._status.append(status)
        self._reason.append(reason)

    def itl(self, gap_s: float, count: int = 1) -> None:
        """``count`` tokens each came ``gap_s`` after their request's previous token."""
        self._itl_s.append(gap_s)
        self._itl_count.append(count)

    def step(
        self, time_s: float, duration_s: float, prefill_tokens: int, decode_tokens: int,
        batch_size: int, preempted: int, swap_out_blocks: int, swap_in_blocks: int,
        copy_blocks: int, cache_hit_tokens: int, state: StepState,
    ) -> None:  # fmt: skip
        """One engine step: what it ran (the plan's counts) and the scheduler's state after
        it. (The frame has the columns in :data:`STEP_COLUMNS` order.)"""
        self._steps += _STEP_ROW.pack(
            time_s, duration_s, prefill_tokens, decode_tokens, batch_size, preempted,
            swap_out_blocks, swap_in_blocks, copy_blocks, cache_hit_tokens, *state,
        )  # fmt: skip

    def preemption(self, time_s: float, req_id: int, swap: bool) -> int:
        """Request ``req_id`` was preempted at ``time_s`` (by swapping it out if ``swap``, else
        by dropping its KV); returns the row, for :meth:`resumed` and :meth:`next_token`."""
        self._preempted_id.append(req_id)
        self._preempted_s.append(time_s)
        self._preempted_swap.append(swap)
        self._resumed_s.append(_NAN)
        self._next_token_s.append(_NAN)
        return len(self._preempted_id) - 1

    def resumed(self, row: int, time_s: float) -> None:
        """The request preempted in ``row`` was scheduled again at ``time_s``."""
        self._resumed_s[row] = time_s

    def next_token(self, row: int, time_s: float) -> None:
        """The request preempted in ``row`` sampled its next token at ``time_s``."""
        self._next_token_s[row] = time_s

    @property
    def done_ids(self) -> array:
        """Ids of the requests recorded so far, in the order they left (read-only use)."""
        return self._done_ids

    @property
    def num_done(self) -> int:
        """Requests recorded so far (finished, rejected or aborted)."""
        return len(self._status)

    @property
    def num_itl_rows(self) -> int:
        """Rows of the ITL table so far (grows whenever a request samples a non-first token)."""
        return len(self._itl_count)

    @property
    def num_steps(self) -> int:
        return len(self._steps) // _STEP_ROW.size

    def frames(self) -> RunFrames:
        """Build the DataFrames (once, at the end of the run).

        Memory: each column is copied once, straight into its final (sorted) order, and the
        frames are not consolidated (``copy=False``), so a million-request run's frames cost
        about what its recorded columns do.
        """
        recorded = np.frombuffer(self._requests, dtype=_REQ_DTYPE)  # a view, no copy
        order = np.argsort(recorded["req_id"], kind="stable")  # recorded as they left
        data: dict[str, object] = dict(_columns(recorded, _REQ_DTYPE.names, order))
        del recorded  # releases the buffer export
        data["truncated"] = data["truncated"].astype(bool)  # type: ignore[union-attr]
        data["status"] = np.array(self._status, dtype=object)[order]
        data["reason"] = np.array(self._reason, dtype=object)[order]
        columns = ["req_id", "arrival_s", "first_scheduled_s", "first_token_s", "finish_s",
                   "prompt_tokens", "output_tokens", "generated_tokens", "num_seqs", "truncated",
                   "priority", "preemptions", "swaps", "swapped_bytes", "recomputed_tokens",
                   "prefix_hit_tokens", "cache_hit_tokens", "status", "reason"]  # fmt: skip
        requests = pd.DataFrame({name: data[name] for name in columns}, copy=False)
        del data
        rows = np.frombuffer(self._steps, dtype=_STEP_DTYPE)  # a view: no copy of the buffer
        steps = pd.DataFrame(_columns(rows, STEP_COLUMNS), copy=False)
        del rows  # releases the buffer export: the recorder stays appendable
        itl = pd.DataFrame(
            {
                "itl_s": np.asarray(self._itl_s, dtype=np.float64),
                "count": np.asarray(self._itl_count, dtype=np.int64),
            },
            copy=False,
        )
        return RunFrames(requests=requests, steps=steps, itl=itl, preemptions=self._preemptions())

    def _preemptions(self) -> pd.DataFrame:
        """The ``preemptions`` frame (:data:`PREEMPTION_COLUMNS`)."""
        kinds = np.array(PREEMPTION_KINDS, dtype=object)
        swap = np.asarray(self._preempted_swap, dtype=np.int8).astype(np.intp)
        columns = (np.asarray(self._preempted_id, dtype=np.int64),
                   np.asarray(self._preempted_s, dtype=np.float64), kinds[swap],
                   np.asarray(self._resumed_s, dtype=np.float64),
                   np.asarray(self._next_token_s, dtype=np.float64))  # fmt: skip
        return pd.DataFrame(dict(zip(PREEMPTION_COLUMNS, columns, strict=True)))


# a step row as recorded: Recorder.step's own parameters (the plan's counts), then StepState
STEP_PLAN_COLUMNS: tuple[str, ...] = tuple(signature(Recorder.step).parameters)[1:-1]
_STEP_RECORDED = STEP_PLAN_COLUMNS + STEP_STATE_COLUMNS
if sorted(_STEP_RECORDED) != sorted(STEP_COLUMNS):
    raise ImportError("Recorder.step and StepState must name every step column once")
_STEP_ROW = struct.Struct("<2d" + "q" * (len(STEP_COLUMNS) - 2))  # time_s, duration_s: floats
_STEP_DTYPE = np.dtype([(name, "<f8" if k < 2 else "<i8") for k, name in enumerate(_STEP_RECORDED)])

_CHUNK_ROWS = 1 << 12  # rows copied per pass: under a MB, in cache for every field


def _columns(
    rows: np.ndarray, names: tuple[str, ...], order: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """The fields of a structured array (rows ``order``, if given) as contiguous columns,
    copied chunk by chunk: each chunk of rows is read from memory once for all its fields,
    not once per field."""
    n = len(rows) if order is None else len(order)
    columns = {name: np.empty(n, dtype=rows.dtype[name]) for name in names}
    for start in range(0, n, _CHUNK_ROWS):
        stop = min(start + _CHUNK_ROWS, n)
        chunk = rows[start:stop] if order is None else rows[order[start:stop]]
        for name, column in columns.items():
            column[start:stop] = chunk[name]
    return columns
