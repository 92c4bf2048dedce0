"""The replica-count search on synthetic judges with a known answer (no simulation)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.capacity.count import (
    CountBracket,
    expected_count_simulations,
    interior_counts,
    narrowed_count,
    search_count,
)
from simkv.capacity.search import SearchError


def needs(fewest: int, asked: list[list[int]] | None = None):
    """Meets exactly from ``fewest`` replicas up (a monotone fleet with a known answer)."""

    def judge(counts: list[int]) -> dict[int, bool]:
        if asked is not None:
            asked.append(list(counts))
        return {c: c >= fewest for c in counts}

    return judge


def test_bisection_finds_a_known_count() -> None:
    """Hand-computed: bounds 1 and 16, 11 replicas needed, one count per round: 1 fails and
    16 meets; then 8 (fails), 12 (meets), 10 (fails), 11 (meets): bracket (10, 11)."""
    asked: list[list[int]] = []
    result = search_count(needs(11, asked), 1, 16)
    assert asked == [[1, 16], [8], [12], [10], [11]]
    assert (result.outcome, result.answer, result.bracket) == ("found", 11, CountBracket(10, 11))
    assert result.rounds == 5


def test_several_counts_per_round() -> None:
    """Bracket (0, 16), 3 counts per round → 4, 8, 12; 9 needed leaves (8, 12)."""
    bracket = CountBracket(0, 16)
    assert interior_counts(bracket, 3) == [4, 8, 12]
    assert narrowed_count(bracket, {4: False, 8: False, 12: True}) == CountBracket(8, 12)


def test_not_monotone_stays_conservative() -> None:
    """A noisy verdict (6 meets, 8 fails) never lowers the answer below a failing count."""
    verdicts = {4: False, 6: True, 8: False, 12: True}
    assert narrowed_count(CountBracket(0, 16), verdicts) == CountBracket(8, 12)


def test_no_count_meets_and_the_lower_bound_meeting() -> None:
    none = search_count(needs(40), 1, 32)
    assert (none.outcome, none.answer, none.judged) == (
        "none_meets",
        None,
        ((1, False), (32, False)),
    )
    low = search_count(needs(2), 3, 32)
    assert (low.outcome, low.answer, low.rounds) == ("all_meet", 3, 1)


@pytest.mark.parametrize(
    ("lo", "hi", "per_round", "message"),
    [
        (4, 2, 1, "need 1 ≤ count_min < count_max"),
        (0, 2, 1, "need 1 ≤ count_min < count_max"),
        (3, 3, 1, "need 1 ≤ count_min < count_max"),
        (1, 8, 0, "per_round must be at least 1"),
    ],
)
def test_unusable_parameters(lo: int, hi: int, per_round: int, message: str) -> None:
    with pytest.raises(SearchError, match=message):
        search_count(needs(2), lo, hi, per_round=per_round)


@settings(max_examples=200, deadline=None)
@given(fewest=st.integers(2, 64), hi=st.integers(64, 300), per_round=st.integers(1, 6))
def test_the_answer_is_exact_for_any_monotone_fleet(fewest: int, hi: int, per_round: int) -> None:
    result = search_count(needs(fewest), 1, hi, per_round=per_round)
    assert (result.outcome, result.answer) == ("found", fewest)
    assert result.bracket == CountBracket(fewest - 1, fewest)
    assert all((c >= fewest) == ok for c, ok in result.judged)
    assert all(1 <= c <= hi for c, _ in result.judged)


def test_a_failed_run_stops_the_search_and_is_no_miss() -> None:
    """A count whose run failed (verdict None) stops the search after its round; taken for a
    miss it would have moved the bracket above it."""
    asked: list[list[int]] = []
    meets = needs(11, asked)

    def judge(counts: list[int]) -> dict[int, bool | None]:
        return {c: None if c == 8 else ok for c, ok in meets(counts).items()}

    result = search_count(judge, 1, 16)
    assert (result.outcome, result.answer, result.bracket) == ("failed", None, None)
    assert asked == [[1, 16], [8]]
    assert result.judged == ((1, False), (16, True), (8, None)) and result.rounds == 2


@pytest.mark.parametrize("fewest", [2, 3, 7, 16])
@pytest.mark.parametrize("per_round", [1, 3])
def test_the_progress_total_is_the_runs_of_a_count_search(fewest: int, per_round: int) -> None:
    result = search_count(needs(fewest), 1, 16, per_round=per_round)
    expected = expected_count_simulations(1, 16, per_round)
    assert abs(len(result.judged) - expected) <= per_round
