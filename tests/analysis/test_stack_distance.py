"""Range counts and grouped LRU stack distances against their definitions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.analysis.stack_distance import count_less, grouped_stack_distances, previous_use
from simkv.kv.errors import InvariantViolation


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(0, 40), max_size=40), data=st.data())
def test_count_less_counts_values_below_threshold_in_range(values, data):
    n = len(values)
    queries = data.draw(
        st.lists(st.tuples(st.integers(0, n), st.integers(0, n), st.integers(0, 45)), max_size=20)
    )
    lo = [min(a, b) for a, b, _ in queries]
    hi = [max(a, b) for a, b, _ in queries]
    threshold = [x for _, _, x in queries]
    got = count_less(np.array(values, np.int64), np.array(lo), np.array(hi), np.array(threshold))
    want = [sum(v < x for v in values[a:b]) for a, b, x in zip(lo, hi, threshold, strict=True)]
    assert got.tolist() == want


def _stack_distances(groups: list[list[int]]) -> list[int]:
    """Definition: position in the LRU stack (1 = most recent) when the group starts, 0 if
    never used; the stack takes each group's keys in order."""
    stack: list[int] = []
    out = []
    for group in groups:
        out += [stack.index(k) + 1 if k in stack else 0 for k in group]
        for key in group:
            if key in stack:
                stack.remove(key)
            stack.insert(0, key)
    return out


@settings(max_examples=200, deadline=None)
@given(groups=st.lists(st.sets(st.integers(0, 12), max_size=5).map(sorted), max_size=15))
def test_grouped_distances_are_lru_stack_positions(groups):
    keys = np.array([k for g in groups for k in g], np.int64)
    starts = np.repeat(np.cumsum([0] + [len(g) for g in groups])[:-1], [len(g) for g in groups])
    assert grouped_stack_distances(keys, starts).tolist() == _stack_distances(groups)


def test_previous_use_and_a_repeated_key_in_one_group():
    assert previous_use(np.array([5, 3, 5, 5, 3])).tolist() == [-1, -1, 0, 2, 1]
    with pytest.raises(InvariantViolation, match="twice in one group"):
        grouped_stack_distances(np.array([1, 1]), np.array([0, 0]))
