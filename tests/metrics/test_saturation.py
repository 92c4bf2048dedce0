"""The overload mark of a comparison: the first-token queue's last drain, the overload share,
and the headline error split at the measured run's last drain (simkv.metrics.saturation)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.metrics.saturation import (
    OVERLOAD_SHARE,
    Drain,
    last_drain,
    saturation_lines,
    saturation_split,
)


def frame(arrival: list[float], first: list[float]) -> pd.DataFrame:
    """A request frame from arrival and first-token instants (NaN: no first token)."""
    a, f = np.array(arrival), np.array(first)
    return pd.DataFrame({"arrival_s": a, "ttft_s": f - a, "e2el_s": f - a + 1.0})


def fifo(arrival: list[float], service: float) -> list[float]:
    """First-token instants of one server taking ``service`` s per request in arrival order."""
    out, free = [], 0.0
    for a in arrival:
        free = max(free, a) + service
        out.append(free)
    return out


def test_a_stable_engine_drains_between_arrivals() -> None:
    arrival = [float(i) for i in range(20)]  # one a second, served in 0.4 s
    drain = last_drain(frame(arrival, fifo(arrival, 0.4)))
    assert drain == Drain(at_s=19.0, after=0, total=20)  # the last request finds it empty
    assert not drain.overloaded


def test_an_overloaded_engine_never_drains_after_the_first_arrival() -> None:
    arrival = [float(i) for i in range(20)]  # one a second, 1.5 s each: the queue grows
    drain = last_drain(frame(arrival, fifo(arrival, 1.5)))
    assert drain == Drain(at_s=0.0, after=19, total=20)
    assert drain.overloaded and drain.share == pytest.approx(0.95)


def test_overload_from_the_middle_of_a_run() -> None:
    arrival = [float(i) for i in range(10)] + [10 + 0.2 * i for i in range(10)]
    first = fifo(arrival, 0.5)  # keeps up at 1/s, falls behind at 5/s
    drain = last_drain(frame(arrival, first))
    # request 10 (at 10 s) finds the queue empty, the 9 after it never do
    assert drain.at_s == pytest.approx(10.0) and drain.after == 9 and drain.overloaded


def test_a_queue_emptying_as_a_request_arrives_counts_as_drained() -> None:
    arrival = [0.0, 1.0, 2.0, 3.0]
    drain = last_drain(frame(arrival, [1.0, 2.0, 3.0, 4.0]))  # each served as the next arrives
    assert drain == Drain(at_s=3.0, after=0, total=4)


def test_a_request_without_a_first_token_never_leaves_the_queue() -> None:
    arrival = [0.0, 1.0, 2.0, 3.0, 4.0]
    drain = last_drain(frame(arrival, [0.5, np.nan, 2.5, 3.5, 4.5]))
    assert drain == Drain(at_s=1.0, after=3, total=5)


def test_the_overload_share_is_the_threshold() -> None:
    assert Drain(0.0, 10, 100).overloaded and not Drain(0.0, 9, 100).overloaded
    assert OVERLOAD_SHARE == 0.1


def test_the_split_scores_each_part_on_the_same_rows_of_both_sides() -> None:
    arrival = [float(i) for i in range(10)] + [10 + 0.2 * i for i in range(10)]
    real = frame(arrival, fifo(arrival, 0.5))
    sim = frame(arrival, fifo(arrival, 0.45))
    seen: list[tuple[list[float], list[float]]] = []

    def headline(a: pd.DataFrame, b: pd.DataFrame) -> float:
        seen.append((a["arrival_s"].tolist(), b["arrival_s"].tolist()))
        return float(len(a))

    split = saturation_split(real, sim, headline)
    assert [part.requests for part in (split.before, split.after)] == [11, 9]
    assert seen == [(arrival[:11], arrival[:11]), (arrival[11:], arrival[11:])]
    assert split.before.mean_abs_diff_pct == 11.0
    lines = saturation_lines(split)
    assert lines[0].startswith("Measured run in overload from 10.0 s")
    assert lines[1] == ("Mean abs. Diff% before saturation 11.0% (11 requests), after 9.0% "
                        "(9 requests).")  # fmt: skip


def test_no_split_when_the_measured_run_keeps_up() -> None:
    arrival = [float(i) for i in range(20)]
    split = saturation_split(frame(arrival, fifo(arrival, 0.4)),
                             frame(arrival, fifo(arrival, 1.5)), lambda a, b: 0.0)  # fmt: skip
    assert split.before is None and split.after is None and split.simulated.overloaded
    assert saturation_lines(split) == [
        "Measured run not in overload (a request found its first-token queue empty 19.0 s in; "
        "0 arrived after); simulated "
        "run in overload from 0.0 s (its first-token queue never drained again; 19 of 20 "
        "requests arrived after)."
    ]


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 2.0), min_size=1, max_size=40),
    service=st.floats(0.01, 2.0),
)
def test_the_last_drain_agrees_with_counting_the_queue(gaps: list[float], service: float) -> None:
    arrival = np.cumsum(gaps).tolist()
    first = fifo(arrival, service)
    drain = last_drain(frame(arrival, first))
    k = len(arrival) - drain.after - 1  # the last request to find the queue empty
    assert arrival[k] == pytest.approx(arrival[0] + drain.at_s)
    # request k finds every earlier request served (first tokens leave before arrivals join)
    assert all(f <= arrival[k] for f in first[:k])
    # every later request finds one still waiting
    for j in range(k + 1, len(arrival)):
        assert any(f > arrival[j] for f in first[:j])
