"""The KV transfers of a disaggregated fleet, and the loads from KV offload tiers, in its trace
(:mod:`simkv.metrics.trace`).

One process, ``KV transfers`` (pid :data:`TRANSFERS_PID`), with the tracks of each decode
replica (``to replica r``), in replica order. For each remotely prefilled request
(``prefill_replica`` ≥ 0, :mod:`simkv.metrics.disagg`) its track holds ``kv held r<id>``
(``kv_handoff_s`` → ``kv_send_s``, when the prefill replica held its KV waiting for decode
blocks) then ``kv transfer r<id>`` (``kv_send_s`` → ``kv_arrive_s``), both with ``args``
``bytes``, ``prefill_replica`` and ``decode_replica``. Transfers into one replica overlap, and
a track's complete events must not, so a replica has as many tracks as it had requests
between hand-off and arrival at once (``to replica r``, ``to replica r · lane 2`` …): each request
takes the first track free at its hand-off.

Kept: the requests given request tracks (the window's ``limit`` earliest arrivals present)
whose hand-off to arrival overlaps the window's span.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

TRANSFERS_PID = 3
"""The process of the KV transfers (beside the engine's 1 and the requests' 2)."""
LOADS_PID = 4
"""The process of the KV-tier loads."""
_US = 1e6  # trace times are microseconds


def transfer_events(
    requests: pd.DataFrame, limit: int, from_s: float | None = None, to_s: float | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The transfer process's events for the ``limit`` earliest arrivals of ``requests`` whose
    hand-off to arrival overlaps ``[from_s, to_s]``; returns (events, transfers shown)."""
    first = requests.sort_values("arrival_s", kind="stable").head(limit)
    start, send = first["kv_handoff_s"].to_numpy(), first["kv_send_s"].to_numpy()
    end = first["kv_arrive_s"].to_numpy()
    keep = (first["prefill_replica"].to_numpy() >= 0) & np.isfinite(start + send + end)
    if from_s is not None:
        keep &= end >= from_s
    if to_s is not None:
        keep &= start <= to_s
    moved = first[keep].sort_values(["replica", "kv_handoff_s", "req_id"], kind="stable")
    events: list[dict[str, Any]] = [_meta(None, "KV transfers")]
    tracks: dict[tuple[int, int], int] = {}  # (decode replica, lane) → tid
    free_at: dict[int, list[float]] = {}  # per decode replica: each lane's last arrival
    for r in moved.itertuples(index=False):
        decode = int(r.replica)
        lane = _lane(free_at.setdefault(decode, []), float(r.kv_handoff_s), float(r.kv_arrive_s))
        if (decode, lane) not in tracks:
            tracks[decode, lane] = tid = len(tracks) + 1  # tid 0 is taken by some viewers
            events.append(
                _meta(tid, f"to replica {decode}" + (f" · lane {lane + 1}" if lane else ""))
            )
        tid = tracks[decode, lane]
        args = {"bytes": int(r.kv_bytes), "prefill_replica": int(r.prefill_replica),
                "decode_replica": decode}  # fmt: skip
        if r.kv_send_s > r.kv_handoff_s:
            events.append(_span(tid, f"kv held r{int(r.req_id)}", r.kv_handoff_s, r.kv_send_s,
                                args))  # fmt: skip
        events.append(_span(tid, f"kv transfer r{int(r.req_id)}", r.kv_send_s, r.kv_arrive_s,
                            args))  # fmt: skip
    return events, len(moved)


def _lane(free_at: list[float], start_s: float, end_s: float) -> int:
    """The first lane free at ``start_s`` (a new one when none is), taken until ``end_s``."""
    for lane, busy_until in enumerate(free_at):
        if busy_until <= start_s:
            free_at[lane] = end_s
            return lane
    free_at.append(end_s)
    return len(free_at) - 1


def tier_load_events(
    requests: pd.DataFrame, limit: int, from_s: float | None = None, to_s: float | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The KV-tier loads process (pid :data:`LOADS_PID`, ``KV tier loads``): per replica,
    tracks ``into replica r`` (lanes as above) with a ``tier load r<id>`` span from each
    load's start to its end (``tier_load_start_s`` → ``tier_load_end_s``, :mod:`simkv.metrics.
    tiers`), ``args`` the tokens each tier supplied; for the ``limit`` earliest arrivals whose
    load overlaps ``[from_s, to_s]``. Returns (events, loads shown)."""
    first = requests.sort_values("arrival_s", kind="stable").head(limit)
    start, end = first["tier_load_start_s"].to_numpy(), first["tier_load_end_s"].to_numpy()
    keep = np.isfinite(start + end)
    if from_s is not None:
        keep &= end >= from_s
    if to_s is not None:
        keep &= start <= to_s
    kinds = [c for c in first.columns if c.startswith("hit_tokens_")]
    if "replica" not in first.columns:
        first = first.assign(replica=0)
    loads = first[keep].sort_values(["replica", "tier_load_start_s", "req_id"], kind="stable")
    events: list[dict[str, Any]] = [_meta(None, "KV tier loads", LOADS_PID)]
    tracks: dict[tuple[int, int], int] = {}
    free_at: dict[int, list[float]] = {}
    for row in loads.to_dict("records"):
        r, begin, done = int(row["replica"]), row["tier_load_start_s"], row["tier_load_end_s"]
        lane = _lane(free_at.setdefault(r, []), begin, done)
        if (r, lane) not in tracks:
            tracks[r, lane] = len(tracks) + 1
            name = f"into replica {r}" + (f" · lane {lane + 1}" if lane else "")
            events.append(_meta(tracks[r, lane], name, LOADS_PID))
        args = {k.removeprefix("hit_"): int(row[k]) for k in kinds if row[k]}
        events.append(_span(tracks[r, lane], f"tier load r{int(row['req_id'])}", begin, done,
                            args, LOADS_PID))  # fmt: skip
    return events, len(loads)


def _meta(tid: int | None, name: str, pid: int = TRANSFERS_PID) -> dict[str, Any]:
    kind = "process_name" if tid is None else "thread_name"
    event: dict[str, Any] = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    if tid is not None:
        event["tid"] = tid
    return event


def _span(
    tid: int, name: str, start_s: float, end_s: float, args: dict[str, int],
    pid: int = TRANSFERS_PID,
) -> dict[str, Any]:  # fmt: skip
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": start_s * _US,
            "dur": (end_s - start_s) * _US, "args": args}  # fmt: skip
