"""Synthetic arrival processes at a constant rate or a piecewise-constant rate schedule.

Every process is built by time-rescaling: draw a renewal process with mean gap 1 in
*operational time* u, then map each point to real time with the inverse of the cumulative
intensity Λ(t) = ∫₀ᵗ rate(s) ds. For a Poisson process this is exact for any schedule; for gamma
and constant gaps it keeps the requested burstiness (cv) measured in operational time.

Times are seconds from the start of the run; the first arrival is one gap after 0, so it is > 0.
All functions are deterministic for a given ``numpy.random.Generator`` and its state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: Draws ``k`` independent gaps with mean 1 (operational time).
GapSampler = Callable[[np.random.Generator, int], np.ndarray]


@dataclass(frozen=True)
class RateSchedule:
    """Piecewise-constant arrival rate.

    ``rates_per_s[k]`` (requests/s, ≥ 0) holds from ``starts_s[k]`` until ``starts_s[k + 1]``; the
    last rate holds forever. Invariants: ``starts_s[0] == 0``, starts strictly increasing, at
    least one rate > 0.
    """

    starts_s: np.ndarray
    rates_per_s: np.ndarray

    def __post_init__(self) -> None:
        starts, rates = self.starts_s, self.rates_per_s
        if starts.ndim != 1 or starts.shape != rates.shape or len(starts) == 0:
            raise ValueError("a schedule needs equal, non-empty lists of starts and rates")
        if starts[0] != 0 or np.any(np.diff(starts) <= 0):
            raise ValueError("schedule starts must begin at 0 s and strictly increase")
        if np.any(rates < 0) or not np.any(rates > 0) or not np.all(np.isfinite(rates)):
            raise ValueError("schedule rates must be finite, ≥ 0, and not all 0")

    @classmethod
    def constant(cls, rate_per_s: float) -> RateSchedule:
        """A single rate from time 0 on."""
        return cls(np.array([0.0]), np.array([float(rate_per_s)]))

    @classmethod
    def from_pairs(cls, pairs: Sequence[Sequence[float]]) -> RateSchedule:
        """From ``[[start_s, rate_per_s], ...]`` as written in a config."""
        table = np.asarray(pairs, dtype=np.float64).reshape(-1, 2)
        return cls(table[:, 0].copy(), table[:, 1].copy())

    @property
    def _cumulative_at_starts(self) -> np.ndarray:
        """Λ at each piece start (expected arrivals before it)."""
        return np.concatenate(([0.0], np.cumsum(np.diff(self.starts_s) * self.rates_per_s[:-1])))

    def operational_time(self, t_s: float) -> float:
        """Λ(t_s): expected number of arrivals in [0, t_s]."""
        k = int(np.searchsorted(self.starts_s, t_s, side="right")) - 1
        return float(self._cumulative_at_starts[k] + (t_s - self.starts_s[k]) * self.rates_per_s[k])

    def real_time(self, u: np.ndarray) -> np.ndarray:
        """Λ⁻¹(u) = min{t : Λ(t) ≥ u} in seconds, elementwise, for u > 0.

        Zero-rate pieces are never chosen (a point on a boundary belongs to the piece that ends
        there); ``inf`` where u lies beyond the total of a schedule that ends at rate 0.
        """
        lam = self._cumulative_at_starts
        k = np.maximum(np.searchsorted(lam, u, side="left") - 1, 0)
        rate = self.rates_per_s[k]
        with np.errstate(divide="ignore", invalid="ignore"):
            t_s = self.starts_s[k] + (u - lam[k]) / rate
        return np.where(rate > 0, t_s, np.inf)


def _exponential_gaps(rng: np.random.Generator, k: int) -> np.ndarray:
    return rng.exponential(1.0, size=k)


def _gamma_gaps(cv: float) -> GapSampler:
    if not cv > 0:
        raise ValueError(f"gamma cv must be > 0, got {cv}")
    shape = 1.0 / cv**2

    def draw(rng: np.random.Generator, k: int) -> np.ndarray:
        return rng.gamma(shape, cv**2, size=k)

    return draw


def _unit_gaps(rng: np.random.Generator, k: int) -> np.ndarray:
    return np.ones(k)


def _schedule(rate: float | RateSchedule) -> RateSchedule:
    if isinstance(rate, RateSchedule):
        return rate
    if not rate > 0:
        raise ValueError(f"arrival rate must be > 0 requests/s, got {rate}")
    return RateSchedule.constant(rate)


def _points_until(rng: np.random.Generator, gaps: GapSampler, horizon: float) -> np.ndarray:
    """Renewal points (mean gap 1) strictly below ``horizon``, drawn in chunks."""
    chunk = int(horizon + 6 * np.sqrt(horizon + 1) + 16)
    parts: list[np.ndarray] = []
    last = 0.0
    while last < horizon:
        part = last + np.cumsum(gaps(rng, chunk))
        parts.append(part)
        last = float(part[-1])
    points = np.concatenate(parts) if parts else np.empty(0)
    return points[points < horizon]


def generate(
    rng: np.random.Generator,
    gaps: GapSampler,
    rate: float | RateSchedule,
    *,
    n: int | None = None,
    duration_s: float | None = None,
) -> np.ndarray:
    """Arrival times (float64 s, non-decreasing) for a renewal process with mean-1 ``gaps``.

    Exactly one of ``n`` (that many arrivals) or ``duration_s`` (every arrival in
    [0, duration_s)) must be given. ``rate`` is a constant requests/s or a :class:`RateSchedule`.
    """
    schedule = _schedule(rate)
    if (n is None) == (duration_s is None):
        raise ValueError("give exactly one of n and duration_s")
    if n is not None:
        if n < 0:
            raise ValueError(f"n must be ≥ 0, got {n}")
        if schedule.rates_per_s[-1] <= 0:
            raise ValueError("a schedule ending at rate 0 cannot produce n arrivals")
        return schedule.real_time(np.cumsum(gaps(rng, n)))
    assert duration_s is not None
    if not duration_s >= 0:
        raise ValueError(f"duration_s must be ≥ 0, got {duration_s}")
    times_s = schedule.real_time(_points_until(rng, gaps, schedule.operational_time(duration_s)))
    return times_s[times_s < duration_s]


def poisson(
    rng: np.random.Generator,
    rate: float | RateSchedule,
    *,
    n: int | None = None,
    duration_s: float | None = None,
) -> np.ndarray:
    """Poisson arrivals (exponential gaps, cv = 1); see :func:`generate`."""
    return generate(rng, _exponential_gaps, rate, n=n, duration_s=duration_s)


def gamma(
    rng: np.random.Generator,
    rate: float | RateSchedule,
    *,
    cv: float,
    n: int | None = None,
    duration_s: float | None = None,
) -> np.ndarray:
    """Gamma-renewal arrivals with gap coefficient of variation ``cv`` (> 1 bursty, 1 Poisson)."""
    return generate(rng, _gamma_gaps(cv), rate, n=n, duration_s=duration_s)


def constant(
    rng: np.random.Generator,
    rate: float | RateSchedule,
    *,
    n: int | None = None,
    duration_s: float | None = None,
) -> np.ndarray:
    """Evenly spaced arrivals, one every 1/rate seconds starting at 1/rate; uses no randomness."""
    return generate(rng, _unit_gaps, rate, n=n, duration_s=duration_s)
