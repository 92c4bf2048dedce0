"""A request's life as consecutive phases, split at its preemptions (the trace's request spans).

From the ``requests`` frame's times and the request's rows of the ``preemptions`` frame
(:mod:`simkv.metrics.recorder`), in order:

* ``queued`` — arrival → first scheduled;
* ``prefill`` — → its first token (or → its first preemption, if that came first);
* ``decode`` — → the finish, or → its next preemption;
* at each preemption, ``preempted (recompute)`` or ``swapped out`` → when it was scheduled
  again, then ``recompute prefill`` or ``swapped in`` → its next token, then ``decode`` again.

A request never scheduled has one zero-length span named by its status (``rejected``).
Invariant (checked by the tests): the phases of a request that left tile ``[arrival_s,
finish_s]``: each starts where the one before ended, and there is one preempted phase per
preemption. A preemption the request never came back from ends at its finish, named by its
status (``preempted (aborted)``: vLLM V0 aborts a request when the CPU swap space is full).
A ``decode`` phase that a preemption cuts at once (it came at the start of the step after
the token) is left out: zero length, it would only clutter the track.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import pandas as pd

PREEMPTED = {"recompute": "preempted (recompute)", "swap": "swapped out"}
"""The phase from a preemption of each kind until the request is scheduled again."""
RESUMED = {"recompute": "recompute prefill", "swap": "swapped in"}
"""The phase from being scheduled again until the next token, after each kind."""


class Phase(NamedTuple):
    """One span of a request's track: ``name`` from ``start_s`` to ``end_s`` (simulated s);
    ``preemption`` numbers the preempted phases from 1 (0 for the others)."""

    name: str
    start_s: float
    end_s: float
    preemption: int = 0


class Preempted(NamedTuple):
    """One request's preemptions in time order, a list per column (its ``preemptions`` rows)."""

    time_s: list[float]
    kind: list[str]
    resumed_s: list[float]
    next_token_s: list[float]


NONE = Preempted([], [], [], [])
"""No preemptions."""


def by_request(preemptions: pd.DataFrame, req_ids: Any) -> dict[int, Preempted]:
    """The preemptions of the requests ``req_ids``, per request, each in time order."""
    mine = preemptions[preemptions["req_id"].isin(req_ids)]
    mine = mine.sort_values(["req_id", "time_s"], kind="stable")
    return {
        int(req_id): Preempted(*(rows[c].tolist() for c in Preempted._fields))
        for req_id, rows in mine.groupby("req_id", sort=False)
    }


def request_phases(r: Any, preempted: Preempted) -> list[Phase]:
    """The phases of request ``r`` (a ``requests`` row: ``arrival_s``, ``first_scheduled_s``,
    ``first_token_s``, ``finish_s``, ``status``) with its ``preempted`` rows (:data:`NONE`:
    none). A time never reached (NaN) ends the track there."""
    if math.isnan(r.first_scheduled_s):
        return [Phase(str(r.status), r.arrival_s, r.arrival_s)]
    phases = [Phase("queued", r.arrival_s, r.first_scheduled_s)]
    start, first, token_s = r.first_scheduled_s, "prefill", r.first_token_s
    for k, at in enumerate(preempted.time_s):
        _segment(phases, start, at, first, token_s, cut=True)
        kind, back = preempted.kind[k], preempted.resumed_s[k]
        if math.isnan(back):  # never scheduled again: it left (or the run ended) preempted
            if not math.isnan(r.finish_s):
                phases.append(Phase(f"preempted ({r.status})", at, r.finish_s, k + 1))
            return phases
        phases.append(Phase(PREEMPTED[kind], at, back, k + 1))
        start, first, token_s = back, RESUMED[kind], preempted.next_token_s[k]
    _segment(phases, start, r.finish_s, first, token_s, cut=False)
    return phases


def _segment(
    phases: list[Phase], start: float, stop: float, first: str, token_s: float, *, cut: bool
) -> None:
    """A stretch of running from ``start`` to ``stop`` (NaN: never stopped; ``cut``: stopped
    by a preemption): ``first`` until its token at ``token_s`` (NaN: none in the stretch),
    then ``decode`` (left out when a preemption cut it at once: zero length)."""
    if math.isnan(stop):
        if not math.isnan(token_s):
            phases.append(Phase(first, start, token_s))
        return
    if token_s <= stop:  # (False for NaN)
        phases.append(Phase(first, start, token_s))
        if token_s < stop or not cut:
            phases.append(Phase("decode", token_s, stop))
    else:
        phases.append(Phase(first, start, stop))
