"""The highest offered rate that meets the SLOs: a bracketing search in log space.

Pure functions, no simulation: a *judge* maps a batch of rates to whether each meets the
objectives (the caller simulates them, in parallel if it likes), and :func:`search` narrows
``[rate_min, rate_max]`` until the bracket is tight.

* Round 0 judges both bounds. ``rate_min`` failing means no rate in range meets the SLOs
  (outcome ``none_meets``); ``rate_max`` meeting means the bounds do not bracket the answer
  (outcome ``all_meet``: raise ``rate_max``). Otherwise the bracket is ``(meets, fails)``.
* Each further round judges ``per_round`` rates spaced evenly in log space strictly inside the
  bracket, so one round shrinks the bracket's ratio to its ``(per_round + 1)``-th root. The
  rates depend only on the bracket and ``per_round`` (never on how many workers run them), so
  the evaluated rates and the answer are the same under every executor.
* The search stops when ``fails / meets ≤ 1 + tolerance``; the answer is ``meets``.
* A rate whose run failed (an error, a timeout, a dead worker: verdict ``None``) neither meets
  nor misses the SLOs, so it can neither narrow the bracket nor be trusted to leave it alone:
  the search stops after the round that judged it (outcome ``failed``, no answer). It is never
  taken for a miss, which would move the next rates below it.

Serving latency grows with the offered rate, so "meets" is assumed monotone (true below the
answer, false above). Where noise breaks that, the search stays conservative: the new upper end
is the lowest failing rate, the new lower end the highest meeting rate below it.

Rates are rounded to :data:`SIGNIFICANT_DIGITS` significant digits (they name run folders and
appear in tables); a round whose rounded rates leave nothing strictly inside the bracket ends
the search.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

SIGNIFICANT_DIGITS = 4
MAX_PER_ROUND = 64
"""Most points (rates or replica counts) one round judges: each is a simulation, and a round
of 64 already shrinks a rate bracket's ratio to its 65th root (a count bracket by 65)."""
Verdict = bool | None
"""Whether a run meets the SLOs; ``None`` when the run failed (it says nothing of the SLOs)."""
Judge = Callable[[list[float]], dict[float, Verdict]]
"""Rates → the verdict on each (a mapping with every rate asked for)."""
Outcome = Literal["found", "none_meets", "all_meet", "failed"]


class SearchError(ValueError):
    """The search's own parameters are unusable (bounds, tolerance, points per round)."""


def rounded(rate: float) -> float:
    """``rate`` to :data:`SIGNIFICANT_DIGITS` significant digits."""
    return float(f"{rate:.{SIGNIFICANT_DIGITS}g}")


@dataclass(frozen=True)
class Bracket:
    """``meets`` meets the SLOs, ``fails`` does not; ``0 < meets < fails``."""

    meets: float
    fails: float

    def __post_init__(self) -> None:
        if not 0 < self.meets < self.fails:
            raise SearchError(f"not a bracket: meets {self.meets:g}, fails {self.fails:g}")

    @property
    def ratio(self) -> float:
        return self.fails / self.meets


@dataclass(frozen=True)
class SearchResult:
    """How a search ended. ``answer``: the highest rate found to meet the SLOs (None when
    none does, or a run failed); ``bracket``: the final bracket (None unless ``found``);
    ``judged``: every rate judged, in judging order, with its verdict; ``rounds``: judging
    rounds, round 0 included."""

    outcome: Outcome
    answer: float | None
    bracket: Bracket | None
    judged: tuple[tuple[float, Verdict], ...]
    rounds: int


def interior_rates(bracket: Bracket, per_round: int) -> list[float]:
    """``per_round`` rates evenly spaced in log space strictly inside ``bracket`` (rounded,
    duplicates and the ends dropped), increasing."""
    lo, hi = math.log(bracket.meets), math.log(bracket.fails)
    step = (hi - lo) / (per_round + 1)
    rates = {rounded(math.exp(lo + step * i)) for i in range(1, per_round + 1)}
    return sorted(r for r in rates if bracket.meets < r < bracket.fails)


def narrowed(bracket: Bracket, verdicts: dict[float, bool]) -> Bracket:
    """The bracket after ``verdicts`` on rates inside it (conservative where not monotone)."""
    inside = {r: ok for r, ok in verdicts.items() if bracket.meets < r < bracket.fails}
    fails = min([r for r, ok in inside.items() if not ok], default=bracket.fails)
    meets = max([r for r, ok in inside.items() if ok and r < fails], default=bracket.meets)
    return Bracket(meets, fails)


def expected_simulations(rate_min: float, rate_max: float, tolerance: float, per_round: int) -> int:
    """About how many runs a search takes when the answer lies inside the bounds: the two
    bounds, then ``per_round`` per round while each round divides the bracket's log-width by
    ``per_round + 1`` down to ``log(1 + tolerance)`` (a progress bar's total, not a promise;
    2 for parameters :func:`check_parameters` refuses, which the search reports)."""
    try:
        check_parameters(rate_min, rate_max, tolerance, per_round)
    except SearchError:
        return 2
    width = math.log(rate_max / rate_min) / math.log(1 + tolerance)
    rounds = math.ceil(math.log(max(width, 1.0)) / math.log(per_round + 1))
    return 2 + per_round * rounds


def check_parameters(rate_min: float, rate_max: float, tolerance: float, per_round: int) -> None:
    """Raise :class:`SearchError` unless the parameters can run a search."""
    if not (math.isfinite(rate_min) and math.isfinite(rate_max) and 0 < rate_min < rate_max):
        raise SearchError(f"need 0 < rate_min < rate_max, got {rate_min:g} and {rate_max:g}")
    if rounded(rate_min) >= rounded(rate_max):
        raise SearchError(f"rate_min and rate_max round to the same rate ({rounded(rate_min):g})")
    if not 0 < tolerance < 1:
        raise SearchError(f"tolerance must lie between 0 and 1, got {tolerance:g}")
    check_per_round(per_round)


def check_per_round(per_round: int) -> None:
    """Raise :class:`SearchError` unless 1 ≤ ``per_round`` ≤ :data:`MAX_PER_ROUND`."""
    if per_round < 1:
        raise SearchError(f"per_round must be at least 1, got {per_round}")
    if per_round > MAX_PER_ROUND:
        raise SearchError(f"per_round must be at most {MAX_PER_ROUND}, got {per_round}")


def search(
    judge: Judge, rate_min: float, rate_max: float, *, tolerance: float = 0.02, per_round: int = 3
) -> SearchResult:
    """The highest rate in ``[rate_min, rate_max]`` meeting the SLOs, within ``tolerance``
    (relative): see the module docstring."""
    check_parameters(rate_min, rate_max, tolerance, per_round)
    lo, hi = rounded(rate_min), rounded(rate_max)
    judged: list[tuple[float, Verdict]] = []

    def ask(rates: list[float]) -> dict[float, bool] | None:
        """The round's verdicts, or None when one of its runs failed."""
        verdicts = judge(rates)
        judged.extend((r, verdicts[r]) for r in rates)
        if any(verdicts[r] is None for r in rates):
            return None
        return {r: bool(verdicts[r]) for r in rates}

    ends = ask([lo, hi])
    if ends is None:
        return SearchResult("failed", None, None, tuple(judged), 1)
    if not ends[lo]:
        return SearchResult("none_meets", None, None, tuple(judged), 1)
    if ends[hi]:
        return SearchResult("all_meet", hi, None, tuple(judged), 1)
    bracket, rounds = Bracket(lo, hi), 1
    while bracket.ratio > 1 + tolerance:
        rates = interior_rates(bracket, per_round)
        if not rates:
            break
        verdicts = ask(rates)
        rounds += 1
        if verdicts is None:
            return SearchResult("failed", None, None, tuple(judged), rounds)
        bracket = narrowed(bracket, verdicts)
    return SearchResult("found", bracket.meets, bracket, tuple(judged), rounds)
