"""content_from_token_ids: block keys agree exactly when the token ids up to the block agree."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.workload.content import KeyStream, block_keys
from simkv.workload.token_content import content_from_token_ids

STREAM = (Path(__file__).resolve().parents[2] / "traces" / "measured" / "llmservingsim-vllm0.19"
          / "sharegpt-llama-3.1-8b-300-sps10.jsonl")  # fmt: skip


def tree_prompts(rng: np.random.Generator, n: int, vocab: int) -> list[np.ndarray]:
    """Prompts that copy a random prefix of an earlier prompt and go on at random; a small
    vocabulary also makes unrelated prompts agree by chance, and some prompts repeat."""
    prompts: list[np.ndarray] = []
    for _ in range(n):
        head = np.empty(0, np.int64)
        if prompts and rng.random() < 0.8:
            parent = prompts[rng.integers(len(prompts))]
            head = parent[: rng.integers(0, len(parent) + 1)]
        tail = rng.integers(0, vocab, size=rng.integers(0 if len(head) else 1, 150))
        prompts.append(np.concatenate([head, tail]).astype(np.int64))
    return prompts


def assert_exact(prompts: list[np.ndarray], bs: int) -> None:
    """Block j of requests a and b (prompt, then generated tokens) has the same key exactly when
    both blocks lie in the prompts and the first (j + 1)·bs token ids are equal."""
    content = content_from_token_ids(prompts)
    assert content.prompt_tokens().tolist() == [len(p) for p in prompts]
    keys = [
        block_keys(content.segments(i), int(content.output_ids[i]), bs, len(p) // bs + 2)
        for i, p in enumerate(prompts)
    ]
    for a in range(len(prompts)):
        for b in range(a + 1, len(prompts)):
            pa, pb = prompts[a], prompts[b]
            for j in range(min(len(keys[a]), len(keys[b]))):
                end = (j + 1) * bs
                same = end <= min(len(pa), len(pb)) and np.array_equal(pa[:end], pb[:end])
                assert (keys[a][j] == keys[b][j]) == same, (a, b, bs, j)


@pytest.mark.parametrize("bs", [1, 16, 64])
def test_exact_against_token_comparison(bs):
    prompts = tree_prompts(np.random.default_rng(bs), 60, vocab=3)
    assert_exact(prompts, bs)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=12), min_size=1, max_size=8),
       st.sampled_from([1, 2, 3, 4]))  # fmt: skip
def test_exact_on_tiny_prompts(lists, bs):
    assert_exact([np.array(p, np.int64) for p in lists], bs)


def test_segments_follow_the_radix_tree():
    prompts = [np.array(p) for p in ([1, 2, 3, 4], [1, 2, 3, 5, 6], [1, 2], [7], [1, 2, 3, 4])]
    c = content_from_token_ids(prompts)
    # nodes: after [1, 2] (a prompt ends), after [1, 2, 3] (a branch), and each prompt's end
    assert [len(c.segments(i)) for i in range(5)] == [3, 3, 1, 1, 3]
    assert [n for _, n in c.segments(1)] == [2, 1, 2]
    assert c.segments(0) == c.segments(4)  # identical prompts share every segment
    assert c.segments(0)[:2] == c.segments(1)[:2] and c.segments(2) == c.segments(0)[:1]
    assert len(set(c.output_ids.tolist())) == 5
    assert c.output_ids.min() > max(c.seg_ids.tolist())


def test_bad_prompts():
    with pytest.raises(ValueError, match="non-empty"):
        content_from_token_ids([np.array([], np.int64)])
    with pytest.raises(ValueError, match="≥ 0"):
        content_from_token_ids([np.array([3, -1])])


def test_sharegpt_stream_is_exact():
    stream = [json.loads(line) for line in STREAM.read_text().splitlines()]
    prompts = [np.array(r["input_tok_ids"], np.int64) for r in stream]
    content = content_from_token_ids(prompts)
    keys = [KeyStream(content.segments(i), int(content.output_ids[i]), 16).extend(len(p) // 16)
            for i, p in enumerate(prompts)]  # fmt: skip
    assert len(content.seg_ids) < 3 * len(prompts)  # one segment per tree node, not per token
    shared_blocks = 0
    for a in range(len(prompts)):
        for b in range(a + 1, len(prompts)):
            pa, pb = prompts[a], prompts[b]
            m = min(len(pa), len(pb))
            differ = np.flatnonzero(pa[:m] != pb[:m])
            common = (int(differ[0]) if len(differ) else m) // 16
            ka, kb = keys[a], keys[b]
            assert ka[:common] == kb[:common]
            if common < min(len(ka), len(kb)):
                assert ka[common] != kb[common]
            shared_blocks += common
    assert shared_blocks > 0  # the stream does share prefixes
