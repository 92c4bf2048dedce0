"""Weighted ITL percentiles equal the percentiles of the repeated samples."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from simkv.metrics.summary import weighted_percentiles

samples = st.lists(
    st.tuples(st.floats(0, 1e3, allow_nan=False), st.integers(1, 5)), min_size=1, max_size=40
)


@given(samples=samples, qs=st.lists(st.floats(0, 100), min_size=1, max_size=4))
def test_weighted_percentiles_match_the_repeated_samples(
    samples: list[tuple[float, int]], qs: list[float]
) -> None:
    values = np.array([v for v, _ in samples])
    counts = np.array([c for _, c in samples])
    got = weighted_percentiles(values, counts, qs)
    want = [float(np.percentile(np.repeat(values, counts), q)) for q in qs]
    assert np.allclose(got, want, rtol=1e-12, atol=1e-9)
