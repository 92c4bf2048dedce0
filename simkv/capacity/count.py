"""The fewest replicas that meet the SLOs at a target rate: an integer bracketing search.

Pure functions, no simulation, in the shape of :mod:`simkv.capacity.search`: a *judge* maps
a batch of replica counts to whether each meets the objectives, and :func:`search_count`
narrows ``[count_min, count_max]`` until the bracket's ends are neighbours.

* Round 0 judges both bounds. ``count_max`` failing means no count in range meets the SLOs
  (outcome ``none_meets``); ``count_min`` meeting means the bounds do not bracket the answer
  (outcome ``all_meet``: the answer is at most ``count_min``; with ``count_min = 1`` it is 1).
  Otherwise the bracket is ``(fails, meets)`` with ``fails < meets``.
* Each further round judges ``per_round`` counts spaced evenly strictly inside the bracket
  (``per_round = 1`` is plain bisection), so a round divides the bracket's width by about
  ``per_round + 1``. The counts depend only on the bracket and ``per_round``, never on the
  executor.
* The search stops when ``meets − fails = 1``; the answer is ``meets``.
* A count whose run failed (verdict ``None``) stops the search after its round (outcome
  ``failed``, no answer), as in :mod:`simkv.capacity.search`: never taken for a miss.

More replicas share the same offered load, so "meets" is assumed monotone (false below the
answer, true above). Where noise breaks that, the search stays conservative: the new lower end
is the highest failing count, the new upper end the lowest meeting count above it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from simkv.capacity.search import Outcome, SearchError, Verdict, check_per_round

CountJudge = Callable[[list[int]], dict[int, Verdict]]
"""Replica counts → the verdict on each (a mapping with every count asked for)."""


@dataclass(frozen=True)
class CountBracket:
    """``fails`` replicas miss the SLOs, ``meets`` replicas meet them; ``0 ≤ fails < meets``
    (``fails = 0``: no replica at all, which never serves)."""

    fails: int
    meets: int

    def __post_init__(self) -> None:
        if not 0 <= self.fails < self.meets:
            raise SearchError(f"not a bracket: fails {self.fails}, meets {self.meets}")


@dataclass(frozen=True)
class CountResult:
    """How a count search ended. ``answer``: the fewest replicas found to meet the SLOs (None
    when none does, or a run failed); ``bracket``: the final bracket (None unless ``found``);
    ``judged``: every count judged, in judging order, with its verdict; ``rounds``: judging
    rounds, round 0 included."""

    outcome: Outcome
    answer: int | None
    bracket: CountBracket | None
    judged: tuple[tuple[int, Verdict], ...]
    rounds: int


def interior_counts(bracket: CountBracket, per_round: int) -> list[int]:
    """Up to ``per_round`` counts evenly spaced strictly inside ``bracket`` (rounded down:
    ``fails + ⌊i × width / (per_round + 1)⌋``), duplicates and the ends dropped, increasing."""
    width = bracket.meets - bracket.fails
    counts = {bracket.fails + i * width // (per_round + 1) for i in range(1, per_round + 1)}
    return sorted(c for c in counts if bracket.fails < c < bracket.meets)


def narrowed_count(bracket: CountBracket, verdicts: dict[int, bool]) -> CountBracket:
    """The bracket after ``verdicts`` on counts inside it (conservative where not monotone)."""
    inside = {c: ok for c, ok in verdicts.items() if bracket.fails < c < bracket.meets}
    fails = max([c for c, ok in inside.items() if not ok], default=bracket.fails)
    meets = min([c for c, ok in inside.items() if ok and c > fails], default=bracket.meets)
    return CountBracket(fails, meets)


def check_count_parameters(count_min: int, count_max: int, per_round: int) -> None:
    """Raise :class:`SearchError` unless the parameters can run a count search."""
    if not 1 <= count_min < count_max:
        raise SearchError(f"need 1 ≤ count_min < count_max, got {count_min} and {count_max}")
    check_per_round(per_round)


def expected_count_simulations(count_min: int, count_max: int, per_round: int) -> int:
    """About how many runs a count search takes when the answer lies inside the bounds (the
    two bounds, then ``per_round`` per round until neighbours; a progress bar's total; 2 for
    parameters the search refuses)."""
    try:
        check_count_parameters(count_min, count_max, per_round)
    except SearchError:
        return 2
    width = max(count_max - count_min, 1)
    rounds = math.ceil(math.log(width) / math.log(per_round + 1))
    return 2 + per_round * rounds


def search_count(
    judge: CountJudge, count_min: int, count_max: int, *, per_round: int = 1
) -> CountResult:
    """The fewest replicas in ``[count_min, count_max]`` meeting the SLOs: see the module
    docstring."""
    check_count_parameters(count_min, count_max, per_round)
    judged: list[tuple[int, Verdict]] = []

    def ask(counts: list[int]) -> dict[int, bool] | None:
        """The round's verdicts, or None when one of its runs failed."""
        verdicts = judge(counts)
        judged.extend((c, verdicts[c]) for c in counts)
        if any(verdicts[c] is None for c in counts):
            return None
        return {c: bool(verdicts[c]) for c in counts}

    ends = ask([count_min, count_max])
    if ends is None:
        return CountResult("failed", None, None, tuple(judged), 1)
    if not ends[count_max]:
        return CountResult("none_meets", None, None, tuple(judged), 1)
    if ends[count_min]:
        return CountResult("all_meet", count_min, None, tuple(judged), 1)
    bracket, rounds = CountBracket(count_min, count_max), 1
    while bracket.meets - bracket.fails > 1:
        # never empty: with width ≥ 2, fails + ⌊per_round × width / (per_round + 1)⌋ is inside
        verdicts = ask(interior_counts(bracket, per_round))
        rounds += 1
        if verdicts is None:
            return CountResult("failed", None, None, tuple(judged), rounds)
        bracket = narrowed_count(bracket, verdicts)
    return CountResult("found", bracket.meets, bracket, tuple(judged), rounds)
