"""A run's timeline as a Chrome / Perfetto trace (the Trace Event Format, JSON object form).

Open ``trace.json`` in https://ui.perfetto.dev or ``chrome://tracing``. Times are simulated
microseconds from 0 (``ts``, ``dur``). Two processes:

* ``engine`` (pid 1): one complete event (``ph: X``) per engine step on the ``steps`` track,
  with its prefill / decode tokens and batch size, and counters (``ph: C``) of running and
  waiting requests and KV blocks used. A fleet run (a ``replica`` column with several values)
  has one such process per replica instead, ``engine (replica r)`` (pid
  :data:`REPLICA_PID_BASE` + r), each with its share of :data:`MAX_STEP_EVENTS`.
* ``requests`` (pid 2): one track per request (``req <id>``) with its phases
  (:mod:`simkv.metrics.spans`): ``queued`` (arrival → first scheduled), ``prefill`` (→ first
  token) and ``decode`` (→ finish), split at each preemption by a ``preempted (recompute)``
  or ``swapped out`` span (→ scheduled again, ``args.preemption`` its number) and then
  ``recompute prefill`` or ``swapped in`` (→ its next token); rejected requests have a
  zero-length ``rejected`` span. Frames without a ``preemptions`` frame (a run folder of an
  older simkv) give unsplit spans, a preempted request's ``decode`` span saying how often in
  its name and ``args``; ``otherData.preempted_spans`` says which (``split`` / ``unsplit``).
* **Markers**: an instant event (``ph: i``) on the engine's ``steps`` track at every step that
  preempted requests (``preemption``) or swapped blocks out or in (``swap out`` / ``swap in``),
  with the count in ``args`` (at most :data:`MAX_MARKERS`, the earliest).

* ``KV transfers`` (pid 3), in a disaggregated fleet's trace only (its requests frame has
  ``prefill_replica``): tracks per decode replica holding each remotely prefilled request's
  ``kv held r<id>`` and ``kv transfer r<id>`` spans (:mod:`simkv.metrics.trace_transfers`),
  for the requests given request tracks; ``otherData.kv_transfers`` counts them.
* ``KV tier loads`` (pid 4), in a trace of a run with KV offload tiers: tracks per replica
  holding each request's ``tier load r<id>`` span (its wait for KV from the tiers), with the
  tokens each tier supplied; ``otherData.tier_loads`` counts them.

A :class:`TraceWindow` keeps only what overlaps ``[from_s, to_s]`` (steps, markers, and the
requests present then) and at most ``limit`` request tracks.

Bounded for big runs: at most :data:`MAX_STEP_EVENTS` step events — beyond, consecutive steps
are merged into windows of equal step count (tokens summed, the batch size and counters of the
window's last step) — and the :data:`MAX_REQUEST_TRACKS` earliest-arriving requests; the
metadata (``otherData``) says how many steps each event covers and how many requests are left out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simkv.metrics.files import frame_path, read_frames
from simkv.metrics.recorder import RunFrames
from simkv.metrics.spans import NONE, Phase, by_request, request_phases
from simkv.metrics.trace_transfers import tier_load_events, transfer_events
from simkv.outputs import write_file

TRACE_FILE = "trace.json"
MAX_STEP_EVENTS = 20_000
MAX_REQUEST_TRACKS = 2_000
MAX_MARKERS = 20_000
_ENGINE, _REQUESTS = 1, 2
REPLICA_PID_BASE = 100
"""A fleet's replica ``r`` is process ``REPLICA_PID_BASE + r`` (clear of pids 1 and 2)."""
_US = 1e6  # trace times are microseconds
_SUMMED = ("prefill_tokens", "decode_tokens")  # a window's tokens: its steps' sum
_LAST = ("batch_size", "num_running", "num_waiting", "blocks_used")  # its last step's state
_MARKERS = (
    ("preempted", "preemption", "requests"),
    ("swap_out_blocks", "swap out", "blocks"),
    ("swap_in_blocks", "swap in", "blocks"),
)  # (step column, marker name, what it counts)
# the columns a trace reads, checked when read back from a run folder (a damaged file is named)
_FINITE = {"steps": ("time_s", "duration_s", *_SUMMED, *_LAST, *(c for c, _, _ in _MARKERS)),
           "requests": ("req_id", "arrival_s", "preemptions", "swaps"),
           "preemptions": ("req_id", "time_s")}  # fmt: skip
_TIMES = {"requests": ("first_scheduled_s", "first_token_s", "finish_s"),
          "preemptions": ("resumed_s", "next_token_s")}  # NaN: never reached  # fmt: skip


@dataclass(frozen=True)
class TraceWindow:
    """What a trace keeps: the simulated time span ``[from_s, to_s]`` (``None``: unbounded)
    and at most ``limit`` request tracks (the earliest arrivals in the span)."""

    from_s: float | None = None
    to_s: float | None = None
    limit: int = MAX_REQUEST_TRACKS

    def steps(self, steps: pd.DataFrame) -> pd.DataFrame:
        """The steps overlapping the span."""
        start = steps["time_s"]
        keep = _overlaps(start, start + steps["duration_s"], self.from_s, self.to_s)
        return steps if keep.all() else steps[keep].reset_index(drop=True)

    def requests(self, requests: pd.DataFrame) -> pd.DataFrame:
        """The requests present during the span (arrived, and not gone before it)."""
        end = requests["finish_s"].fillna(requests["first_scheduled_s"])
        end = end.fillna(requests["arrival_s"])
        keep = _overlaps(requests["arrival_s"], end, self.from_s, self.to_s)
        return requests if keep.all() else requests[keep]


def _overlaps(start: pd.Series, end: pd.Series, from_s: float | None, to_s: float | None) -> Any:
    keep = np.ones(len(start), dtype=bool)
    if from_s is not None:
        keep &= end.to_numpy() >= from_s
    if to_s is not None:
        keep &= start.to_numpy() <= to_s
    return keep


def _meta(pid: int, tid: int | None, name: str) -> dict[str, Any]:
    kind = "process_name" if tid is None else "thread_name"
    event: dict[str, Any] = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    if tid is not None:
        event["tid"] = tid
    return event


def _windows(steps: pd.DataFrame, limit: int) -> tuple[pd.DataFrame, int]:
    """Steps merged ``k`` at a time (k = 1 while there are at most ``limit``); returns (rows, k)."""
    k = max(1, math.ceil(len(steps) / limit))
    if k == 1:
        return steps, 1
    starts = np.arange(0, len(steps), k)
    ends = np.minimum(starts + k, len(steps)) - 1
    time_s = steps["time_s"].to_numpy()
    stop_s = time_s + steps["duration_s"].to_numpy()
    summed = {c: np.add.reduceat(steps[c].to_numpy(), starts) for c in _SUMMED}
    last = {c: steps[c].to_numpy()[ends] for c in _LAST}
    merged = pd.DataFrame(
        {"time_s": time_s[starts], "duration_s": stop_s[ends] - time_s[starts], **summed, **last}
    )
    return merged, k


def engine_events(steps: pd.DataFrame, limit: int = MAX_STEP_EVENTS) -> tuple[list[dict], int]:
    """:func:`step_events` of the one engine, or of each replica of a fleet on its own process
    (``limit`` shared among them); returns (events, the most steps one event covers)."""
    replicas = sorted(steps["replica"].unique()) if "replica" in steps.columns else []
    if len(replicas) <= 1:
        return step_events(steps, limit)
    events: list[dict[str, Any]] = []
    most = 1
    for r in replicas:
        mine = steps[steps["replica"] == r].reset_index(drop=True)
        pid = REPLICA_PID_BASE + int(r)
        found, k = step_events(mine, max(1, limit // len(replicas)), pid, f"engine (replica {r})")
        events += found
        most = max(most, k)
    return events, most


def step_events(
    steps: pd.DataFrame, limit: int = MAX_STEP_EVENTS, pid: int = _ENGINE, name: str = "engine"
) -> tuple[list[dict], int]:
    """Complete events of one engine's steps and its counters, on process ``pid`` called
    ``name``; returns (events, steps per event)."""
    rows, k = _windows(steps, limit)
    events: list[dict[str, Any]] = [_meta(pid, None, name), _meta(pid, 1, "steps")]
    name = "step" if k == 1 else f"{k} steps"
    for r in rows.itertuples(index=False):
        ts = r.time_s * _US
        args = {"prefill_tokens": int(r.prefill_tokens), "decode_tokens": int(r.decode_tokens),
                "batch_size": int(r.batch_size)}  # fmt: skip
        events.append({"ph": "X", "pid": pid, "tid": 1, "name": name, "ts": ts,
                       "dur": r.duration_s * _US, "args": args})  # fmt: skip
        events.append(
            {
                "ph": "C",
                "pid": pid,
                "name": "requests",
                "ts": ts,
                "args": {"running": int(r.num_running), "waiting": int(r.num_waiting)},
            }
        )
        events.append({"ph": "C", "pid": pid, "name": "kv_blocks_used", "ts": ts,
                       "args": {"blocks": int(r.blocks_used)}})  # fmt: skip
    return events + marker_events(steps, pid), k


def marker_events(steps: pd.DataFrame, pid: int = _ENGINE) -> list[dict]:
    """Instant events on the ``steps`` track of process ``pid``: one per step and kind that
    preempted requests or swapped blocks, at the step's start (the :data:`MAX_MARKERS`
    earliest)."""
    events: list[dict[str, Any]] = []
    for column, name, unit in _MARKERS:
        counts = steps[column].to_numpy()
        for at in np.flatnonzero(counts > 0):
            events.append({"ph": "i", "s": "t", "pid": pid, "tid": 1, "name": name,
                           "ts": float(steps["time_s"].iat[at]) * _US,
                           "args": {unit: int(counts[at])}})  # fmt: skip
    events.sort(key=lambda e: e["ts"])
    return events[:MAX_MARKERS]


def _span(tid: int, phase: Phase) -> dict[str, Any]:
    dur_s = max(phase.end_s - phase.start_s, 0.0)
    event = {"ph": "X", "pid": _REQUESTS, "tid": tid, "name": phase.name,
             "ts": phase.start_s * _US, "dur": dur_s * _US}  # fmt: skip
    if phase.preemption:
        event["args"] = {"preemption": phase.preemption}
    return event


def request_events(
    requests: pd.DataFrame, limit: int = MAX_REQUEST_TRACKS, preemptions: pd.DataFrame | None = None
) -> list[dict]:
    """A track per request (the ``limit`` earliest arrivals) with its phases, split at its
    ``preemptions`` (:mod:`simkv.metrics.spans`); None (not recorded): unsplit, a preempted
    request's decode span named so (``decode (preempted 2×, 1 by swap)``)."""
    first = requests.sort_values("arrival_s", kind="stable").head(limit)
    split = {} if preemptions is None else by_request(preemptions, first["req_id"])
    events: list[dict[str, Any]] = [_meta(_REQUESTS, None, "requests")]
    for r in first.itertuples(index=False):
        tid = int(r.req_id) + 1  # tid 0 is taken by some viewers
        events.append(_meta(_REQUESTS, tid, f"req {int(r.req_id)}"))
        events += [_span(tid, p) for p in request_phases(r, split.get(int(r.req_id), NONE))]
        if preemptions is None and r.preemptions and events[-1]["name"] == "decode":
            _name_unsplit(events[-1], int(r.preemptions), int(r.swaps))
    return events


def _name_unsplit(span: dict[str, Any], preempted: int, swapped: int) -> None:
    """Name and annotate an unsplit decode span with its request's preemptions (``swapped``
    of them by swapping out)."""
    by_swap = f", {swapped} by swap" if swapped else ""
    span["name"] = f"decode (preempted {preempted}×{by_swap})"
    span["args"] = {"preemptions": preempted, "swaps": swapped}


def trace_document(frames: RunFrames, window: TraceWindow | None = None) -> dict[str, Any]:
    """The whole trace (a JSON object: ``traceEvents``, ``displayTimeUnit``, ``otherData``),
    of what ``window`` keeps (default: everything, the first :data:`MAX_REQUEST_TRACKS`
    request tracks)."""
    window = window or TraceWindow()
    steps, per_event = engine_events(window.steps(frames.steps))
    present = window.requests(frames.requests)
    requests = request_events(present, window.limit, frames.preemptions)
    other = {"steps_per_event": per_event,
             "requests_left_out": max(0, len(present) - window.limit),
             "window_s": [window.from_s, window.to_s],
             "preempted_spans": "unsplit" if frames.preemptions is None else "split"}  # fmt: skip
    if "prefill_replica" in present.columns:  # a disaggregated fleet: its KV transfers
        transfers, other["kv_transfers"] = transfer_events(
            present, window.limit, window.from_s, window.to_s
        )
        requests += transfers
    if "tier_load_start_s" in present.columns:  # a run with KV tiers: its loads
        loads, other["tier_loads"] = tier_load_events(
            present, window.limit, window.from_s, window.to_s
        )
        requests += loads
    return {"traceEvents": steps + requests, "displayTimeUnit": "ms", "otherData": other}


def unsplit_note(run_dir: Path) -> str | None:
    """Why the trace of ``run_dir`` has unsplit request spans (the folder has no
    ``preemptions`` frame, as one written by an older simkv), or None when it has split ones."""
    if frame_path(run_dir, "preemptions") is not None:
        return None
    return (
        "no preemptions.parquet (written by an older simkv): a preempted request's spans are "
        "not split at its preemptions; rerun the config to split them"
    )


def write_trace(
    run_dir: Path, frames: RunFrames | None = None, window: TraceWindow | None = None
) -> Path:
    """Write ``run_dir/trace.json`` from ``frames`` (default: the folder's, checked: a missing
    or damaged frame file is an :class:`InputError` naming it) and ``window``; returns its
    path."""
    path = run_dir / TRACE_FILE
    if frames is None:
        columns = {"requests": ("status",), "preemptions": ("kind",)}
        frames = read_frames(run_dir, columns, finite=_FINITE, numeric=_TIMES)
    doc = trace_document(frames, window)
    return write_file(path, json.dumps(doc, separators=(",", ":")) + "\n")
