"""The capacity search on synthetic judges with a known answer (no simulation)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.capacity.search import (
    Bracket,
    SearchError,
    expected_simulations,
    interior_rates,
    narrowed,
    rounded,
    search,
)


def threshold_judge(limit: float, asked: list[list[float]] | None = None):
    """Meets exactly up to ``limit`` requests/s (a monotone system with a known capacity)."""

    def judge(rates: list[float]) -> dict[float, bool]:
        if asked is not None:
            asked.append(list(rates))
        return {r: r <= limit for r in rates}

    return judge


def test_finds_a_known_capacity_within_the_tolerance() -> None:
    asked: list[list[float]] = []
    result = search(threshold_judge(3.7, asked), 0.25, 32.0, tolerance=0.02, per_round=3)
    assert result.outcome == "found"
    assert result.bracket is not None
    assert result.answer == result.bracket.meets
    assert result.bracket.meets <= 3.7 < result.bracket.fails
    assert result.bracket.fails / result.bracket.meets <= 1.02
    # round 0 asks the bounds; every later round asks 3 rates inside the bracket
    assert asked[0] == [0.25, 32.0]
    assert all(len(rates) == 3 for rates in asked[1:])
    assert result.rounds == len(asked)
    assert len(result.judged) == sum(len(rates) for rates in asked)


def test_one_round_shrinks_the_log_ratio_by_per_round_plus_one() -> None:
    """Hand-computed: bracket (1, 16), 3 rates per round → 2, 4, 8 (log-spaced); a limit of 5
    leaves (4, 8)."""
    bracket = Bracket(1.0, 16.0)
    assert interior_rates(bracket, 3) == [2.0, 4.0, 8.0]
    assert narrowed(bracket, {2.0: True, 4.0: True, 8.0: False}) == Bracket(4.0, 8.0)


def test_the_rates_do_not_depend_on_anything_but_the_bracket() -> None:
    first = search(threshold_judge(5.3), 0.5, 20.0)
    again = search(threshold_judge(5.3), 0.5, 20.0)
    assert first == again


def test_not_monotone_stays_conservative() -> None:
    """A noisy verdict (4 fails, 6 meets) never raises the answer above a failing rate."""
    verdicts = {2.0: True, 4.0: False, 8.0: False}
    assert narrowed(Bracket(1.0, 16.0), {**verdicts, 6.0: True}) == Bracket(2.0, 4.0)


def test_no_rate_meets() -> None:
    result = search(threshold_judge(0.1), 0.25, 32.0)
    assert (result.outcome, result.answer, result.rounds) == ("none_meets", None, 1)
    assert result.judged == ((0.25, False), (32.0, False))


def test_bounds_that_do_not_bracket() -> None:
    result = search(threshold_judge(100.0), 0.25, 32.0)
    assert (result.outcome, result.answer) == ("all_meet", 32.0)


@pytest.mark.parametrize(
    ("lo", "hi", "tol", "per_round", "message"),
    [
        (4.0, 2.0, 0.02, 3, "need 0 < rate_min < rate_max"),
        (0.0, 2.0, 0.02, 3, "need 0 < rate_min < rate_max"),
        (1.00001, 1.00002, 0.02, 3, "round to the same rate"),
        (1.0, 2.0, 0.0, 3, "tolerance must lie between 0 and 1"),
        (1.0, 2.0, 0.02, 0, "per_round must be at least 1"),
    ],
)
def test_unusable_parameters(
    lo: float, hi: float, tol: float, per_round: int, message: str
) -> None:
    with pytest.raises(SearchError, match=message):
        search(threshold_judge(1.5), lo, hi, tolerance=tol, per_round=per_round)


@settings(max_examples=200, deadline=None)
@given(
    limit=st.floats(0.3, 30.0),
    tol=st.sampled_from([0.01, 0.02, 0.05, 0.2]),
    per_round=st.integers(1, 6),
)
def test_the_answer_brackets_any_monotone_capacity(
    limit: float, tol: float, per_round: int
) -> None:
    result = search(threshold_judge(limit), 0.25, 32.0, tolerance=tol, per_round=per_round)
    assert result.bracket is not None
    meets, fails = result.bracket.meets, result.bracket.fails
    assert meets <= limit < fails
    # converged, or no rounded rate is left strictly inside the bracket
    assert fails / meets <= 1 + tol or not interior_rates(result.bracket, per_round)
    assert all((r <= limit) == ok for r, ok in result.judged)
    assert all(r == rounded(r) for r, _ in result.judged)


def test_a_failed_run_stops_the_search_and_is_no_miss() -> None:
    """A run that failed (verdict None) says nothing of the SLOs: the search stops after its
    round instead of taking it for a miss and moving the next rates below it."""
    asked: list[list[float]] = []
    meets = threshold_judge(3.7, asked)

    def judge(rates: list[float]) -> dict[float, bool | None]:
        verdicts: dict[float, bool | None] = dict(meets(rates))
        verdicts.update({r: None for r in rates if 2 < r < 3})
        return verdicts

    result = search(judge, 0.25, 32.0, per_round=3)
    assert (result.outcome, result.answer, result.bracket) == ("failed", None, None)
    assert asked == [[0.25, 32.0], [0.8409, 2.828, 9.514]]  # no round after the failure
    assert result.rounds == 2 and (2.828, None) in result.judged


def test_a_failed_bound_stops_round_0() -> None:
    result = search(lambda rates: {r: None if r == 32.0 else True for r in rates}, 0.25, 32.0)
    assert (result.outcome, result.rounds, result.judged) == (
        "failed", 1, ((0.25, True), (32.0, None)))  # fmt: skip


@pytest.mark.parametrize("limit", [0.3, 3.7, 4.8, 30.0])
@pytest.mark.parametrize("per_round", [1, 3, 5])
def test_the_progress_total_is_the_runs_of_a_search_that_brackets(
    limit: float, per_round: int
) -> None:
    result = search(threshold_judge(limit), 0.25, 32.0, tolerance=0.02, per_round=per_round)
    expected = expected_simulations(0.25, 32.0, 0.02, per_round)
    assert abs(len(result.judged) - expected) <= per_round  # rounding may save or need a round
    assert expected_simulations(0.25, 0.25, 0.02, per_round) == 2  # refused: the bounds only
