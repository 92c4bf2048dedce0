"""Vectorised block ids partition blocks exactly as block_keys' chained keys do."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.workload.block_ids import block_ids, with_outputs
from simkv.workload.content import PromptContent, block_keys

segment = st.tuples(st.integers(0, 3), st.integers(1, 9))
prompts = st.lists(st.lists(segment, min_size=1, max_size=5), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(prompts=prompts, block_size=st.integers(1, 6))
def test_ids_equal_exactly_when_block_keys_equal(prompts, block_size):
    content = PromptContent.from_lists(prompts, range(50, 50 + len(prompts)))
    full = content.prompt_tokens() // block_size
    ids = block_ids(content, block_size, full)
    keys = [
        k
        for i, segments in enumerate(prompts)
        for k in block_keys(segments, 50 + i, block_size, int(full[i]))
    ]
    assert len(keys) == len(ids.ids)
    pairs = set(zip(keys, ids.ids.tolist(), strict=True))
    assert len(pairs) == len(set(keys)) == len(set(ids.ids.tolist()))  # a bijection
    assert ids.starts.tolist() == (np.cumsum(full) - full).tolist()


@settings(max_examples=200, deadline=None)
@given(prompts=prompts, block_size=st.integers(1, 6), data=st.data())
def test_ids_of_prompt_and_output_equal_block_keys_of_the_sequence(prompts, block_size, data):
    n = len(prompts)
    output_ids = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    outputs = np.array(data.draw(st.lists(st.integers(1, 9), min_size=n, max_size=n)))
    content = PromptContent.from_lists(prompts, output_ids)
    full = (content.prompt_tokens() + outputs - 1) // block_size
    ids = block_ids(with_outputs(content, outputs), block_size, full).ids.tolist()
    keys = [
        k
        for i, segments in enumerate(prompts)
        for k in block_keys(segments, output_ids[i], block_size, int(full[i]))
    ]
    assert len(set(zip(keys, ids, strict=True))) == len(set(keys)) == len(set(ids))


def test_ids_follow_segments_not_single_blocks():
    # [(5, 4)] and [(5, 2), (5, 2)] hold the same ids but part differently: block 1 differs
    content = PromptContent.from_lists([[(5, 4)], [(5, 2), (5, 2)], [(5, 6)]], [8, 9, 10])
    ids = block_ids(content, 2, np.array([2, 2, 2])).ids.tolist()
    assert ids[0] == ids[2] == ids[4] and ids[1] == ids[5] != ids[3]


def test_counts_beyond_the_prompt_are_refused():
    content = PromptContent.from_lists([[(1, 3)]], [2])
    with pytest.raises(ValueError, match="full blocks"):
        block_ids(content, 2, np.array([2]))
