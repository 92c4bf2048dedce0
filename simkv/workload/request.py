"""Request records: one :class:`Request` value, and a columnar :class:`Workload` of many.

A workload stores four numpy columns (about 32 MB per million requests) plus optional ones:
prompt content identity (:class:`~simkv.workload.content.PromptContent`) for prefix caching,
``session_id``/``turn``/``think_s`` for closed-loop multi-turn sessions, ``pin_ttl_s`` (a
retention hint), and
``n_seqs``/``fork_after``/``beam`` for multi-sequence requests (parallel sampling, tree of
thought, beam search). :class:`Request`
values are made on demand when iterating.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simkv.workload.columns import (
    COLUMNS,
    RETENTION_COLUMNS,
    SAMPLING_COLUMNS,
    SESSION_COLUMNS,
    check_columns,
)
from simkv.workload.content import PromptContent

_ITER_CHUNK = 65_536


@dataclass(frozen=True, slots=True)
class Request:
    """One inference request.

    ``priority``: lower value = more important (vLLM's priority scheduling); 0 by default.
    """

    req_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    priority: int = 0


def _frozen_view(values: np.ndarray) -> np.ndarray:
    """A read-only view, leaving the caller's array writeable."""
    view = values.view()
    view.flags.writeable = False
    return view


@dataclass(frozen=True)
class Workload:
    """Requests in arrival order, as columns; request ``i`` has ``req_id == i``.

    Invariants (checked on construction, :func:`~simkv.workload.columns.check_columns`;
    :class:`ValueError` otherwise): all columns are 1-D of equal length; ``arrival_s`` is
    float64, finite, ≥ 0 and non-decreasing (the first arrival may be > 0); ``prompt_tokens`` and
    ``output_tokens`` are int64 ≥ 1; ``priority`` is int64 (lower = more important). Columns are
    stored as read-only views.

    Optional columns (None = absent):

    * ``content``: request ``i``'s segments sum to ``prompt_tokens[i]`` tokens, and every
      segment id and output id is ≥ 0 (negative ids are simkv's own).
    * ``session_id``, ``turn`` (int64) and ``think_s`` (float64, finite, ≥ 0), all three or
      none: closed-loop sessions. The turns of a session appear as 0, 1, 2, … in array order.
      Turn 0 arrives at ``arrival_s``; turn k > 0 arrives ``think_s`` seconds after turn k - 1
      of its session finishes (the engine's job), and its ``arrival_s`` equals its session's
      turn-0 arrival (checked), which keeps ``arrival_s`` sorted and every session inside any
      time window whole. ``think_s`` of a turn 0 is unused. A turn k > 0 may repeat (parallel
      calls, e.g. an agent's subagents): every row of turn k + 1 then waits until all rows of
      turn k have finished, and arrives its own ``think_s`` after the last of them
      (:class:`simkv.engine.sessions.Sessions`).
    * ``pin_ttl_s`` (float64, finite, ≥ 0): a retention hint per request, seconds to keep its
      prefix cached after it finishes (as prompt-caching APIs allow), for the KV tiers to
      honour; the workload's own behaviour does not depend on it.
    * ``n_seqs`` (int64 ≥ 1), ``fork_after`` (int64 ≥ 0) and ``beam`` (bool), all three or
      none (none = one sequence per request): request ``i`` generates ``fork_after[i]`` output
      tokens as one sequence, then forks into ``n_seqs[i]`` sequences that each generate the
      rest of its output; ``beam[i]`` makes them beams (re-drawn parents after every decode
      step; ``fork_after`` is then 0, checked). ``n_seqs == 1`` is a plain request.
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    priority: np.ndarray
    source: str
    content: PromptContent | None = None
    session_id: np.ndarray | None = None
    turn: np.ndarray | None = None
    think_s: np.ndarray | None = None
    pin_ttl_s: np.ndarray | None = None
    n_seqs: np.ndarray | None = None
    fork_after: np.ndarray | None = None
    beam: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.arrival_s) if np.ndim(self.arrival_s) == 1 else -1
        optional = {**SESSION_COLUMNS, **RETENTION_COLUMNS, **SAMPLING_COLUMNS}
        for name, dtype in {**COLUMNS, **optional}.items():
            values = getattr(self, name)
            if values is None and name not in COLUMNS:
                continue
            if not isinstance(values, np.ndarray) or values.ndim != 1:
                raise ValueError(f"{name} must be a 1-D numpy array")
            if values.dtype != dtype:
                raise ValueError(f"{name} must have dtype {dtype}, got {values.dtype}")
            if len(values) != n:
                raise ValueError(f"{name} has {len(values)} values, arrival_s has {n}")
            object.__setattr__(self, name, _frozen_view(values))
        check_columns(self)

    @classmethod
    def from_arrays(
        cls,
        arrival_s: np.ndarray | list[float],
        prompt_tokens: np.ndarray | list[int],
        output_tokens: np.ndarray | list[int],
        priority: np.ndarray | list[int] | None = None,
        *,
        source: str,
        content: PromptContent | None = None,
        session_id: np.ndarray | list[int] | None = None,
        turn: np.ndarray | list[int] | None = None,
        think_s: np.ndarray | list[float] | None = None,
    ) -> Workload:
        """Build from array-likes, converting dtypes (``priority`` None = all 0). No sorting."""
        arrivals = np.asarray(arrival_s, dtype=np.float64)
        prios = np.zeros(len(arrivals), np.int64) if priority is None else priority
        sessions = {"session_id": session_id, "turn": turn, "think_s": think_s}
        return cls(
            arrivals,
            np.asarray(prompt_tokens, dtype=np.int64),
            np.asarray(output_tokens, dtype=np.int64),
            np.asarray(prios, dtype=np.int64),
            source,
            content,
            **{
                name: None if values is None else np.asarray(values, SESSION_COLUMNS[name])
                for name, values in sessions.items()
            },
        )

    def __len__(self) -> int:
        return len(self.arrival_s)

    def with_sampling(
        self, n_seqs: int | np.ndarray, fork_after: int | np.ndarray, beam: bool | np.ndarray
    ) -> Workload:
        """This workload with the sampling columns set (scalars apply to every request)."""
        n = len(self)
        return dataclasses.replace(
            self,
            n_seqs=np.broadcast_to(np.asarray(n_seqs, np.int64), n).copy(),
            fork_after=np.broadcast_to(np.asarray(fork_after, np.int64), n).copy(),
            beam=np.broadcast_to(np.asarray(beam, np.bool_), n).copy(),
        )

    def request(self, i: int) -> Request:
        """Request ``i`` (0-based, in arrival order); IndexError when out of range."""
        if not 0 <= i < len(self):
            raise IndexError(f"request {i} out of range for {len(self)} requests")
        return Request(
            i,
            float(self.arrival_s[i]),
            int(self.prompt_tokens[i]),
            int(self.output_tokens[i]),
            int(self.priority[i]),
        )

    def __iter__(self) -> Iterator[Request]:
        for start in range(0, len(self), _ITER_CHUNK):
            stop = min(start + _ITER_CHUNK, len(self))
            columns = (getattr(self, name)[start:stop].tolist() for name in COLUMNS)
            for offset, row in enumerate(zip(*columns, strict=True)):
                yield Request(start + offset, *row)

    def to_frame(self) -> pd.DataFrame:
        """One row per request: ``req_id, arrival_s, prompt_tokens, output_tokens, priority``.

        Then, when present: ``session_id, turn, think_s``; ``pin_ttl_s``; ``n_seqs,
        fork_after, beam``; and
        for content ``segments`` (a list of ``(segment_id, length_tokens)`` per row) and
        ``output_id``.
        """
        data = {"req_id": np.arange(len(self), dtype=np.int64)}
        data.update({name: np.array(getattr(self, name)) for name in COLUMNS})
        if self.session_id is not None:
            data.update({name: np.array(getattr(self, name)) for name in SESSION_COLUMNS})
        if self.pin_ttl_s is not None:
            data["pin_ttl_s"] = np.array(self.pin_ttl_s)
        if self.n_seqs is not None:
            data.update({name: np.array(getattr(self, name)) for name in SAMPLING_COLUMNS})
        frame = pd.DataFrame(data)
        if self.content is not None:
            frame["segments"] = [self.content.segments(i) for i in range(len(self))]
            frame["output_id"] = np.array(self.content.output_ids, dtype=np.int64)
        return frame

    @property
    def mean_rate_per_s(self) -> float | None:
        """Requests per second between first and last arrival: (n - 1) / span.

        None when fewer than two requests or all arrive at the same instant.
        """
        if len(self) < 2:
            return None
        span_s = float(self.arrival_s[-1] - self.arrival_s[0])
        return (len(self) - 1) / span_s if span_s > 0 else None

    def take(self, n: int) -> Workload:
        """The first ``n`` requests (all of them when ``n`` ≥ len).

        A session cut by the limit keeps its leading turns (those among the first ``n`` rows),
        which is again a valid session.
        """
        return self._subset(slice(0, n), shift_s=0.0, source=f"{self.source}, first {n}")

    def between(self, start_s: float | None, end_s: float | None) -> Workload:
        """Requests with ``start_s ≤ arrival_s < end_s``, shifted so ``start_s`` becomes 0.

        None means unbounded on that side (and no shift when ``start_s`` is None). All turns of
        a session share its turn-0 ``arrival_s``, so a window keeps or drops whole sessions.
        """
        lo = 0 if start_s is None else int(np.searchsorted(self.arrival_s, start_s, "left"))
        hi = len(self) if end_s is None else int(np.searchsorted(self.arrival_s, end_s, "left"))
        return self._subset(
            slice(lo, max(lo, hi)),
            shift_s=start_s or 0.0,
            source=f"{self.source}, window [{start_s}, {end_s}) s",
        )

    def time_scaled(self, factor: float) -> Workload:
        """Every arrival time (so every inter-arrival gap) multiplied by ``factor`` > 0.

        Think times are left unchanged: they follow a finished turn, not the arrival clock.
        """
        if not factor > 0:
            raise ValueError(f"time scale factor must be > 0, got {factor}")
        source = f"{self.source}, times x{factor:g}"
        return dataclasses.replace(self, arrival_s=self.arrival_s * factor, source=source)

    def _subset(self, rows: slice, *, shift_s: float, source: str) -> Workload:
        lo, hi, _ = rows.indices(len(self))
        hi = max(lo, hi)
        sessions = {
            name: None if getattr(self, name) is None else getattr(self, name)[lo:hi]
            for name in (*SESSION_COLUMNS, *RETENTION_COLUMNS, *SAMPLING_COLUMNS)
        }
        return Workload(
            self.arrival_s[lo:hi] - shift_s,
            self.prompt_tokens[lo:hi],
            self.output_tokens[lo:hi],
            self.priority[lo:hi],
            source,
            None if self.content is None else _content_rows(self.content, lo, hi),
            **sessions,
        )


def _content_rows(content: PromptContent, lo: int, hi: int) -> PromptContent:
    """Requests ``lo ≤ i < hi`` of ``content``, with their segment and output ids unchanged."""
    first, last = int(content.offsets[lo]), int(content.offsets[hi])
    return PromptContent(
        content.seg_ids[first:last],
        content.seg_lens[first:last],
        content.offsets[lo : hi + 1] - first,
        content.output_ids[lo:hi],
    )
