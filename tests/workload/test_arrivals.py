import numpy as np
import pytest

from simkv.workload import arrivals
from simkv.workload.arrivals import RateSchedule


def rng(seed: int = 7) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_constant_rate_exact_times():
    assert arrivals.constant(rng(), 4.0, n=3).tolist() == [0.25, 0.5, 0.75]
    # arrivals in [0, duration): the one at exactly 1.0 s is excluded
    assert arrivals.constant(rng(), 4.0, duration_s=1.0).tolist() == [0.25, 0.5, 0.75]


def test_constant_schedule_exact_times_including_a_silent_piece():
    schedule = RateSchedule.from_pairs([[0, 1], [2, 0], [5, 1]])
    # unit points u = 1, 2, 3, 4; u = 2 belongs to the end of the first piece
    assert arrivals.constant(rng(), schedule, n=4).tolist() == [1.0, 2.0, 6.0, 7.0]
    assert arrivals.constant(rng(), schedule, duration_s=7.0).tolist() == [1.0, 2.0, 6.0]
    faster = RateSchedule.from_pairs([[0, 1], [2, 4]])
    assert arrivals.constant(rng(), faster, n=4).tolist() == [1.0, 2.0, 2.25, 2.5]


def test_schedule_cumulative_and_inverse():
    schedule = RateSchedule.from_pairs([[0, 2], [10, 0], [20, 5]])
    assert schedule.operational_time(5.0) == 10.0
    assert schedule.operational_time(15.0) == 20.0
    assert schedule.operational_time(22.0) == 30.0
    assert schedule.real_time(np.array([10.0, 20.0, 30.0])).tolist() == [5.0, 10.0, 22.0]
    ending = RateSchedule.from_pairs([[0, 1], [2, 0]])
    assert ending.real_time(np.array([1.0, 2.0, 2.5])).tolist() == [1.0, 2.0, np.inf]
    with pytest.raises(ValueError, match="rate 0"):
        arrivals.poisson(rng(), ending, n=5)
    assert arrivals.poisson(rng(), ending, duration_s=100.0).max() < 2.0


@pytest.mark.parametrize(
    "pairs",
    [[[1, 2]], [[0, 1], [0, 2]], [[0, 1], [5, 2], [3, 1]], [[0, 0]], [[0, -1], [1, 2]]],
)
def test_bad_schedules_are_rejected(pairs):
    with pytest.raises(ValueError):
        RateSchedule.from_pairs(pairs)


def test_exactly_one_of_n_and_duration():
    with pytest.raises(ValueError, match="exactly one"):
        arrivals.poisson(rng(), 1.0)
    with pytest.raises(ValueError, match="exactly one"):
        arrivals.poisson(rng(), 1.0, n=3, duration_s=2.0)
    with pytest.raises(ValueError, match="rate"):
        arrivals.poisson(rng(), 0.0, n=3)
    with pytest.raises(ValueError, match="cv"):
        arrivals.gamma(rng(), 1.0, cv=0.0, n=3)


def test_same_seed_same_arrays_and_different_seed_differs():
    for draw in (
        lambda g: arrivals.poisson(g, 3.0, n=500),
        lambda g: arrivals.gamma(g, 3.0, cv=2.5, duration_s=100.0),
        lambda g: arrivals.poisson(g, RateSchedule.from_pairs([[0, 1], [10, 5]]), n=300),
    ):
        a, b, c = draw(rng(1)), draw(rng(1)), draw(rng(2))
        assert np.array_equal(a, b)
        assert not np.array_equal(a, c)


def test_poisson_gap_mean_and_cv():
    times = arrivals.poisson(rng(), 5.0, n=20_000)
    gaps = np.diff(np.concatenate(([0.0], times)))
    assert np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(0.2, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("cv", [0.5, 2.0, 3.0])
def test_gamma_cv_matches_request(cv):
    times = arrivals.gamma(rng(), 10.0, cv=cv, n=20_000)
    gaps = np.diff(np.concatenate(([0.0], times)))
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.1)


def test_poisson_duration_count_and_bounds():
    times = arrivals.poisson(rng(), 50.0, duration_s=200.0)
    assert np.all(np.diff(times) >= 0)
    assert times.max() < 200.0
    assert abs(len(times) - 10_000) < 5 * 100  # 5 standard deviations


def test_poisson_schedule_counts_per_piece():
    schedule = RateSchedule.from_pairs([[0, 2], [100, 10], [200, 0]])
    times = arrivals.poisson(rng(), schedule, duration_s=300.0)
    first, second, third = (
        np.sum((times >= a) & (times < b)) for a, b in ((0, 100), (100, 200), (200, 300))
    )
    assert abs(first - 200) < 5 * np.sqrt(200)
    assert abs(second - 1000) < 5 * np.sqrt(1000)
    assert third == 0


def test_zero_duration_gives_no_arrivals():
    assert len(arrivals.poisson(rng(), 5.0, duration_s=0.0)) == 0
    assert len(arrivals.poisson(rng(), 5.0, n=0)) == 0
