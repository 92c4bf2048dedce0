"""Is a run in overload, and how close is the simulation before and after it saturated?

A run is *in overload* when its queue stops draining: the requests waiting for their first
token (arrived, no token yet: queued or prefilling) are never all served again before the
last arrival. :func:`last_drain` finds, on one side's request frame, the last request that
arrived to find that queue empty; every request after it arrived behind earlier ones still
waiting, served by an engine that had not caught up. Below saturation the queue empties
between arrivals, so that request is one of the last few; in overload it is where the queue
started to grow.

:data:`OVERLOAD_SHARE` decides when the stretch after it is overload rather than the run's
final burst: at least that share of the requests arrived in it. A comparison
(:func:`saturation_split`) then splits the requests at the *measured* run's last drain (both
sides hold the same requests in arrival order) and computes the headline error of each part,
so an error that only the overloaded part carries (queueing amplifies any step-time error)
is told apart from one that the whole run has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

OVERLOAD_SHARE = 0.1
"""Least share of a run's requests arriving after its first-token queue last drained for the
run to count as in overload. A stable engine's queue drains within a few requests of the last
arrival (a burst at the end keeps it busy for a few more); one in ten requests is a stretch
no burst of a stable 150–300-request run reaches, and overload reaches within seconds."""


@dataclass(frozen=True)
class Drain:
    """When one side's first-token queue was last found empty.

    ``at_s``: the arrival of the last request that found it empty, in seconds after the first
    arrival (0: the queue never drained once the first request arrived); ``after``: the
    requests arriving after that one (each found the queue busy), of ``total``.
    """

    at_s: float
    after: int
    total: int

    @property
    def share(self) -> float:
        """The share of the requests arriving after the last drain."""
        return self.after / self.total if self.total else 0.0

    @property
    def overloaded(self) -> bool:
        """Whether the run counts as in overload (:data:`OVERLOAD_SHARE`)."""
        return self.share >= OVERLOAD_SHARE


@dataclass(frozen=True)
class Part:
    """One part of the requests (arrival order) and its headline error (mean |Diff%|, None
    when no metric has one)."""

    requests: int
    mean_abs_diff_pct: float | None


@dataclass(frozen=True)
class SaturationSplit:
    """Both sides' last drains and, when the measured run is in overload, the headline error
    of the requests arriving before its last drain and of those arriving after it."""

    measured: Drain
    simulated: Drain
    before: Part | None = None
    after: Part | None = None


def last_drain(requests: pd.DataFrame) -> Drain:
    """The :class:`Drain` of a request frame (``arrival_s``, ``ttft_s``; a request without a
    first token never leaves the queue)."""
    return _drain(requests)[0]


def _drain(requests: pd.DataFrame) -> tuple[Drain, np.ndarray]:
    """:func:`last_drain`, and which requests arrived after the drain (:func:`_late`)."""
    late = _late(requests)
    arrival = requests["arrival_s"].to_numpy(np.float64)
    if not len(arrival):
        return Drain(0.0, 0, 0), late
    opened = arrival[~late].max()  # the last request to find the queue empty
    return Drain(float(opened - arrival.min()), int(late.sum()), len(arrival)), late


def _late(requests: pd.DataFrame) -> np.ndarray:
    """Which requests arrived after the last one that found the first-token queue empty (in
    arrival order; at one instant first tokens leave before arrivals join, so a queue that
    empties as a request arrives counts as empty)."""
    arrival = requests["arrival_s"].to_numpy(np.float64)
    total = len(arrival)
    first = arrival + requests["ttft_s"].to_numpy(np.float64)
    first = np.where(np.isfinite(first), first, np.inf)
    times = np.concatenate([first, arrival])
    steps = np.concatenate([-np.ones(total, np.int64), np.ones(total, np.int64)])
    order = np.lexsort((steps, times))  # by time, a leaving (−1) before a joining (+1); stable
    before = np.cumsum(steps[order]) - steps[order]  # the queue each event finds
    found_empty = np.flatnonzero((steps[order] == 1) & (before == 0))
    late = np.zeros(total, bool)
    if len(found_empty):
        joined_later = order[found_empty[-1] + 1 :]
        late[joined_later[joined_later >= total] - total] = True
    return late


def saturation_split(
    measured: pd.DataFrame,
    simulated: pd.DataFrame,
    headline: Callable[[pd.DataFrame, pd.DataFrame], float | None],
) -> SaturationSplit:
    """Both sides' drains; when the measured run is in overload, ``headline`` (the mean
    |Diff%| of two request frames) of the requests before and after its last drain (the same
    rows of both frames: they hold the same requests in arrival order)."""
    (real, late), sim = _drain(measured), last_drain(simulated)
    if not real.overloaded:
        return SaturationSplit(real, sim)
    parts = []
    for rows in (~late, late):
        picked = (measured[rows].reset_index(drop=True), simulated[rows].reset_index(drop=True))
        parts.append(Part(int(rows.sum()), headline(*picked) if rows.any() else None))
    return SaturationSplit(real, sim, parts[0], parts[1])


def _drain_text(drain: Drain) -> str:
    if not drain.overloaded:
        return (f"not in overload (a request found its first-token queue empty "
                f"{drain.at_s:.1f} s in; {drain.after} arrived after)")  # fmt: skip
    return (f"in overload from {drain.at_s:.1f} s (its first-token queue never drained again; "
            f"{drain.after} of {drain.total} requests arrived after)")  # fmt: skip


def saturation_lines(split: SaturationSplit) -> list[str]:
    """The split as sentences: each side's state, then the two parts' headline errors."""
    lines = [f"Measured run {_drain_text(split.measured)}; simulated run "
             f"{_drain_text(split.simulated)}."]  # fmt: skip
    if split.before is not None and split.after is not None:
        shown = ["—" if p.mean_abs_diff_pct is None else f"{p.mean_abs_diff_pct:.1f}%"
                 for p in (split.before, split.after)]  # fmt: skip
        lines.append(
            f"Mean abs. Diff% before saturation {shown[0]} ({split.before.requests} requests), "
            f"after {shown[1]} ({split.after.requests} requests)."
        )
    return lines
