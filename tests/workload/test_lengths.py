import math

import numpy as np
import pytest

from simkv.errors import InputError
from simkv.workload import lengths


def rng(seed: int = 3) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_fixed_and_clipping():
    assert lengths.fixed(rng(), 3, 7).tolist() == [7, 7, 7]
    assert lengths.fixed(rng(), 2, 7, max_tokens=5).tolist() == [5, 5]
    assert lengths.fixed(rng(), 2, 7, min_tokens=9).tolist() == [9, 9]
    assert lengths.fixed(rng(), 2, 7).dtype == np.int64


def test_clip_rounds_and_floors_at_one():
    values = np.array([-3.0, 0.4, 1.5, 2.5, 2.6, 10.0])
    assert lengths.clip_tokens(values).tolist() == [1, 1, 2, 2, 3, 10]
    assert lengths.clip_tokens(values, min_tokens=2, max_tokens=4).tolist() == [2, 2, 2, 2, 3, 4]
    with pytest.raises(ValueError):
        lengths.clip_tokens(values, min_tokens=5, max_tokens=4)


def test_uniform_includes_both_ends():
    draws = lengths.uniform(rng(), 5000, 3, 5)
    assert set(draws.tolist()) == {3, 4, 5}
    assert lengths.uniform(rng(), 4, 8, 8).tolist() == [8, 8, 8, 8]
    with pytest.raises(ValueError):
        lengths.uniform(rng(), 4, 9, 8)


def test_normal_mean_and_floor():
    draws = lengths.normal(rng(), 20_000, 500.0, 50.0)
    assert draws.mean() == pytest.approx(500.0, rel=0.01)
    assert lengths.normal(rng(), 1000, 1.0, 5.0).min() == 1


def test_lognormal_params_from_mean_and_median():
    mu, sigma = lengths.lognormal_params(math.exp(0.5), 1.0)
    assert mu == 0.0
    assert sigma == pytest.approx(1.0)
    assert lengths.lognormal_params(3.0, 3.0) == (math.log(3.0), 0.0)
    with pytest.raises(ValueError):
        lengths.lognormal_params(2.0, 3.0)


def test_lognormal_median_and_mean():
    mu, sigma = lengths.lognormal_params(1500.0, 1000.0)
    draws = lengths.lognormal(rng(), 20_000, mu, sigma)
    assert np.median(draws) == pytest.approx(1000.0, rel=0.04)
    assert draws.mean() == pytest.approx(1500.0, rel=0.05)


def test_zipf_frequencies_match_power_law():
    draws = lengths.zipf(rng(), 22_000, 1.0, 1, 3)
    counts = np.bincount(draws, minlength=4)[1:] / len(draws)
    np.testing.assert_allclose(counts, [6 / 11, 3 / 11, 2 / 11], atol=0.01)
    shifted = lengths.zipf(rng(), 1000, 2.0, 100, 200)
    assert shifted.min() >= 100
    assert shifted.max() <= 200
    with pytest.raises(ValueError):
        lengths.zipf(rng(), 10, 1.0, 0, 5)


def test_empirical_samples_from_column(tmp_path):
    path = tmp_path / "pool.csv"
    path.write_text("a,len\n1,10\n2,20\n3,30\n")
    draws = lengths.empirical(rng(), 3000, path, "len")
    assert set(draws.tolist()) == {10, 20, 30}
    assert lengths.empirical(rng(), 50, path, "len", max_tokens=15).max() == 15
    jsonl = tmp_path / "pool.jsonl"
    jsonl.write_text('{"n": 4}\n{"n": 4}\n')
    assert lengths.empirical(rng(), 5, jsonl, "n").tolist() == [4] * 5


def test_empirical_errors_name_file_line_and_column(tmp_path):
    path = tmp_path / "pool.csv"
    path.write_text("len\n10\n0\n")
    with pytest.raises(InputError) as err:
        lengths.empirical(rng(), 3, path, "len")
    assert str(err.value) == f"{path}:3 len: must be ≥ 1, got 0"
    with pytest.raises(InputError, match="missing column 'size'"):
        lengths.empirical(rng(), 3, path, "size")
    with pytest.raises(InputError, match="cannot read"):
        lengths.empirical(rng(), 3, tmp_path / "nope.csv", "len")


def test_samplers_are_deterministic():
    for draw in (
        lambda g: lengths.uniform(g, 100, 1, 1000),
        lambda g: lengths.normal(g, 100, 300.0, 100.0),
        lambda g: lengths.lognormal(g, 100, 6.0, 1.0),
        lambda g: lengths.zipf(g, 100, 1.2, 1, 4000),
    ):
        assert np.array_equal(draw(rng(5)), draw(rng(5)))
        assert not np.array_equal(draw(rng(5)), draw(rng(6)))
