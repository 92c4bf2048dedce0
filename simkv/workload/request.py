"""Request records: one :class:`Request` value, and a columnar :class:`Workload` of many.

A workload stores four numpy columns and no per-request objects, so a million requests cost
about 32 MB. :class:`Request` values are made on demand when iterating.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

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

    Invariants (checked on construction, :class:`ValueError` otherwise): all columns are 1-D of
    equal length; ``arrival_s`` is float64, finite, ≥ 0 and non-decreasing (the first arrival may
    be > 0); ``prompt_tokens`` and ``output_tokens`` are int64 ≥ 1; ``priority`` is int64 (lower =
    more important). Columns are stored as read-only views.
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    priority: np.ndarray
    source: str

    def __post_init__(self) -> None:
        n = len(self.arrival_s) if np.ndim(self.arrival_s) == 1 else -1
        for name, dtype in _COLUMNS.items():
            values = getattr(self, name)
            if not isinstance(values, np.ndarray) or values.ndim != 1:
                raise ValueError(f"{name} must be a 1-D numpy array")
            if values.dtype != dtype:
                raise ValueError(f"{name} must have dtype {dtype}, got {values.dtype}")
            if len(values) != n:
                raise ValueError(f"{name} has {len(values)} values, arrival_s has {n}")
            object.__setattr__(self, name, _frozen_view(values))
        _check_values(self)

    @classmethod
    def from_arrays(
        cls,
        arrival_s: np.ndarray | list[float],
        prompt_tokens: np.ndarray | list[int],
        output_tokens: np.ndarray | list[int],
        priority: np.ndarray | list[int] | None = None,
        *,
        source: str,
    ) -> Workload:
        """Build from array-likes, converting dtypes (``priority`` None = all 0). No sorting."""
        arrivals = np.asarray(arrival_s, dtype=np.float64)
        prios = np.zeros(len(arrivals), np.int64) if priority is None else priority
        return cls(
            arrivals,
            np.asarray(prompt_tokens, dtype=np.int64),
            np.asarray(output_tokens, dtype=np.int64),
            np.asarray(prios, dtype=np.int64),
            source,
        )

    def __len__(self) -> int:
        return len(self.arrival_s)

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
            columns = (getattr(self, name)[start:stop].tolist() for name in _COLUMNS)
            for offset, row in enumerate(zip(*columns, strict=True)):
                yield Request(start + offset, *row)

    def to_frame(self) -> pd.DataFrame:
        """One row per request: ``req_id, arrival_s, prompt_tokens, output_tokens, priority``."""
        data = {"req_id": np.arange(len(self), dtype=np.int64)}
        data.update({name: np.array(getattr(self, name)) for name in _COLUMNS})
        return pd.DataFrame(data)

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
        """The first ``n`` requests (all of them when ``n`` ≥ len)."""
        return self._subset(slice(0, n), shift_s=0.0, source=f"{self.source}, first {n}")

    def between(self, start_s: float | None, end_s: float | None) -> Workload:
        """Requests with ``start_s ≤ arrival_s < end_s``, shifted so ``start_s`` becomes 0.

        None means unbounded on that side (and no shift when ``start_s`` is None).
        """
        lo = 0 if start_s is None else int(np.searchsorted(self.arrival_s, start_s, "left"))
        hi = len(self) if end_s is None else int(np.searchsorted(self.arrival_s, end_s, "left"))
        return self._subset(
            slice(lo, max(lo, hi)),
            shift_s=start_s or 0.0,
            source=f"{self.source}, window [{start_s}, {end_s}) s",
        )

    def time_scaled(self, factor: float) -> Workload:
        """Every arrival time (so every inter-arrival gap) multiplied by ``factor`` > 0."""
        if not factor > 0:
            raise ValueError(f"time scale factor must be > 0, got {factor}")
        return Workload(
            self.arrival_s * factor,
            self.prompt_tokens,
            self.output_tokens,
            self.priority,
            f"{self.source}, times x{factor:g}",
        )

    def _subset(self, rows: slice, *, shift_s: float, source: str) -> Workload:
        return Workload(
            self.arrival_s[rows] - shift_s,
            self.prompt_tokens[rows],
            self.output_tokens[rows],
            self.priority[rows],
            source,
        )


_COLUMNS: dict[str, np.dtype] = {
    "arrival_s": np.dtype(np.float64),
    "prompt_tokens": np.dtype(np.int64),
    "output_tokens": np.dtype(np.int64),
    "priority": np.dtype(np.int64),
}


def _check_values(w: Workload) -> None:
    """Raise ValueError naming the first request that breaks a value invariant."""
    checks = (
        ("arrival_s", ~np.isfinite(w.arrival_s) | (w.arrival_s < 0), "finite and ≥ 0"),
        ("prompt_tokens", w.prompt_tokens < 1, "≥ 1"),
        ("output_tokens", w.output_tokens < 1, "≥ 1"),
    )
    for name, bad, rule in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name}[{i}] = {getattr(w, name)[i]} must be {rule}")
    if len(w) > 1:
        back = np.diff(w.arrival_s) < 0
        if back.any():
            i = int(np.argmax(back)) + 1
            raise ValueError(f"arrival_s must be non-decreasing: [{i}] < [{i - 1}]")
