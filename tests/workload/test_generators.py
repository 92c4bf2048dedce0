import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from pydantic import TypeAdapter

from simkv.config.workload import WorkloadConfig
from simkv.errors import InputError
from simkv.workload.build import build_workload
from simkv.workload.content import block_keys
from simkv.workload.generators import multi_turn, shared_prefix, zipf_ranks
from simkv.workload.request import Workload

ADAPTER = TypeAdapter(WorkloadConfig)
ALL_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens", "session_id", "turn", "think_s")


def draws(*batches: list) -> Callable[[int], np.ndarray]:
    """A sampler handing out ``batches`` in order, checking each requested size."""
    queue = [np.asarray(batch) for batch in batches]

    def sample(n: int) -> np.ndarray:
        batch = queue.pop(0)
        assert n == len(batch)
        return batch

    return sample


def shared_keys(w: Workload, i: int, j: int, bs: int) -> int:
    """Equal leading block keys of requests i and j (prompts and generated tokens)."""
    n = (int(w.prompt_tokens[i]) + int(w.prompt_tokens[j])) // bs + 2
    c = w.content
    a = block_keys(c.segments(i), int(c.output_ids[i]), bs, n)
    b = block_keys(c.segments(j), int(c.output_ids[j]), bs, n)
    return next((k for k, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), n)


def build(data: dict, seed: int = 0) -> Workload:
    return build_workload(ADAPTER.validate_python(data), np.random.default_rng(seed), Path("."))


def test_shared_prefix_exact_content():
    w = shared_prefix(
        np.random.default_rng(0),
        np.array([0.0, 1.0, 2.0]),
        num_prefixes=1,
        zipf_a=1.0,
        prefix_tokens=draws([6]),
        suffix_tokens=draws([1, 2, 3]),
        output_tokens=draws([4, 5, 6]),
        source="t",
    )
    c = w.content
    assert [c.segments(i) for i in range(3)] == [
        [(0, 6), (1, 1)],
        [(0, 6), (3, 2)],
        [(0, 6), (5, 3)],
    ]
    assert c.output_ids.tolist() == [2, 4, 6]
    assert w.prompt_tokens.tolist() == [7, 8, 9]
    assert w.output_tokens.tolist() == [4, 5, 6]
    assert w.arrival_s.tolist() == [0.0, 1.0, 2.0]
    assert w.session_id is None


def test_shared_prefix_ids_follow_the_drawn_prefix():
    w = shared_prefix(
        np.random.default_rng(3),
        np.zeros(40),
        num_prefixes=3,
        zipf_a=0.0,
        prefix_tokens=draws([10, 20, 30]),
        suffix_tokens=draws(np.ones(40, np.int64)),
        output_tokens=draws(np.ones(40, np.int64)),
        source="t",
    )
    c = w.content
    prefix = c.seg_ids[0::2]
    assert set(prefix.tolist()) == {0, 1, 2}
    assert c.seg_lens[0::2].tolist() == [(p + 1) * 10 for p in prefix.tolist()]
    assert c.seg_ids[1::2].tolist() == [3 + 2 * i for i in range(40)]
    assert w.prompt_tokens.tolist() == [(p + 1) * 10 + 1 for p in prefix.tolist()]


SHARED = {
    "kind": "shared_prefix",
    "num_requests": 400,
    "arrival": {"kind": "poisson", "rate": 5.0},
    "num_prefixes": 4,
    "prefix_tokens": {"kind": "uniform", "low": 1, "high": 2000},
    "zipf_a": 1.0,
    "suffix_tokens": {"kind": "uniform", "low": 1, "high": 100},
    "output_tokens": {"kind": "fixed", "value": 7},
}


@pytest.mark.parametrize("bs", [1, 16, 512])
def test_same_prefix_shares_floor_prefix_over_block_size(bs):
    w = build(SHARED)
    c = w.content
    prefix = c.seg_ids[c.offsets[:-1]]
    for p in range(4):
        i, j = np.flatnonzero(prefix == p)[:2].tolist()
        length = int(c.seg_lens[c.offsets[i]])
        assert shared_keys(w, i, j, bs) == length // bs
    other = int(np.flatnonzero(prefix != prefix[0])[0])
    assert shared_keys(w, 0, other, bs) == 0


def test_zipf_popularity_rank_one_most_frequent():
    ranks = zipf_ranks(np.random.default_rng(1), 30_000, 3, 1.0)
    freq = np.bincount(ranks, minlength=3) / 30_000
    np.testing.assert_allclose(freq, [6 / 11, 3 / 11, 2 / 11], atol=0.015)
    uniform = np.bincount(zipf_ranks(np.random.default_rng(1), 30_000, 3, 0.0)) / 30_000
    np.testing.assert_allclose(uniform, [1 / 3] * 3, atol=0.015)
    w = build({**SHARED, "num_requests": 5000, "num_prefixes": 6, "zipf_a": 1.5})
    counts = np.bincount(w.content.seg_ids[w.content.offsets[:-1]], minlength=6)
    assert counts.argmax() == 0
    assert counts[0] > counts[1] > counts[2]


def tiny_sessions(max_prompt_tokens: int) -> Workload:
    return multi_turn(
        np.array([0.0, 2.0]),
        turns=draws([3, 2]),
        first_prompt_tokens=draws([10, 20]),
        new_tokens=draws([5, 6, 7]),
        output_tokens=draws([1, 2, 3, 4, 5]),
        think_s=draws([0.5, 1.5, 2.5]),
        max_prompt_tokens=max_prompt_tokens,
        source="t",
    )


def test_multi_turn_exact_content():
    w = tiny_sessions(10_000)
    c = w.content
    assert [c.segments(i) for i in range(5)] == [
        [(0, 10)],
        [(0, 10), (1, 1), (2, 5)],
        [(0, 10), (1, 1), (2, 5), (3, 2), (4, 6)],
        [(6, 20)],
        [(6, 20), (7, 4), (8, 7)],
    ]
    assert c.output_ids.tolist() == [1, 3, 5, 7, 9]
    assert w.prompt_tokens.tolist() == [10, 16, 24, 20, 31]
    assert w.output_tokens.tolist() == [1, 2, 3, 4, 5]
    assert w.session_id.tolist() == [0, 0, 0, 1, 1]
    assert w.turn.tolist() == [0, 1, 2, 0, 1]
    assert w.think_s.tolist() == [0.0, 0.5, 1.5, 0.0, 2.5]
    assert w.arrival_s.tolist() == [0.0, 0.0, 0.0, 2.0, 2.0]


def test_multi_turn_max_prompt_ends_sessions_early():
    assert tiny_sessions(24).prompt_tokens.tolist() == [10, 16, 24, 20]
    w = tiny_sessions(23)
    c = w.content
    assert [c.segments(i) for i in range(3)] == [[(0, 10)], [(0, 10), (1, 1), (2, 5)], [(4, 20)]]
    assert c.output_ids.tolist() == [1, 3, 5]
    assert (w.session_id.tolist(), w.turn.tolist()) == ([0, 0, 1], [0, 1, 0])
    assert w.think_s.tolist() == [0.0, 0.5, 0.0]
    clipped = tiny_sessions(15)  # session 1's first prompt 20 is clipped to 15
    assert [clipped.content.segments(i) for i in range(2)] == [[(0, 10)], [(2, 15)]]
    assert clipped.prompt_tokens.tolist() == [10, 15]


MULTI = {
    "kind": "multi_turn",
    "num_sessions": 3,
    "arrival": {"kind": "constant", "rate": 1.0},
    "turns": {"kind": "fixed", "value": 3},
    "think_s": {"kind": "fixed", "value_s": 2.0},
    "first_prompt_tokens": {"kind": "fixed", "value": 1000},
    "new_tokens": {"kind": "fixed", "value": 50},
    "output_tokens": {"kind": "fixed", "value": 300},
}


@pytest.mark.parametrize(("bs", "first", "second"), [(1, 1300, 1650), (16, 81, 103), (512, 2, 3)])
def test_next_turn_shares_previous_prompt_and_answer(bs, first, second):
    # prompts 1000, 1350, 1700; turn k shares turn k-1's prompt + 300-token answer:
    # 1300 and 1650 tokens -> floor(1300 / bs) and floor(1650 / bs) blocks
    w = build(MULTI)
    assert w.prompt_tokens.tolist() == [1000, 1350, 1700] * 3
    assert w.think_s.tolist() == [0.0, 2.0, 2.0] * 3
    assert w.arrival_s.tolist() == [1.0] * 3 + [2.0] * 3 + [3.0] * 3
    assert (shared_keys(w, 0, 1, bs), shared_keys(w, 1, 2, bs)) == (first, second)
    assert shared_keys(w, 2, 3, bs) == 0  # different sessions share nothing


def test_random_sessions_share_exactly_the_previous_turn():
    data = {
        **MULTI,
        "num_sessions": 30,
        "turns": {"kind": "uniform", "low": 1, "high": 6},
        "think_s": {"kind": "exponential", "mean_s": 3.0},
        "first_prompt_tokens": {"kind": "uniform", "low": 1, "high": 900},
        "new_tokens": {"kind": "uniform", "low": 1, "high": 90},
        "output_tokens": {"kind": "uniform", "low": 1, "high": 90},
        "max_prompt_tokens": 1200,
    }
    w = build(data, seed=5)
    assert w.prompt_tokens.max() <= 1200
    later = np.flatnonzero(w.turn > 0).tolist()
    assert len(later) > 20
    for i in later:
        common = int(w.prompt_tokens[i - 1] + w.output_tokens[i - 1])
        assert shared_keys(w, i - 1, i, 16) == common // 16
    assert (w.think_s[w.turn == 0] == 0).all() and (w.think_s[w.turn > 0] > 0).all()


RANDOM_MULTI = {
    **MULTI,
    "turns": {"kind": "uniform", "low": 1, "high": 5},
    "think_s": {"kind": "uniform", "low_s": 0, "high_s": 9},
    "first_prompt_tokens": {"kind": "uniform", "low": 1, "high": 900},
}


@pytest.mark.parametrize("data", [SHARED, RANDOM_MULTI], ids=["shared_prefix", "multi_turn"])
def test_deterministic_per_seed(data):
    a, b, c = build(data, 1), build(data, 1), build(data, 2)
    for name in ALL_COLUMNS:
        assert np.array_equal(getattr(a, name), getattr(b, name))
    for name in ("seg_ids", "seg_lens", "offsets", "output_ids"):
        assert np.array_equal(getattr(a.content, name), getattr(b.content, name))
    assert not np.array_equal(a.content.seg_lens, c.content.seg_lens)


def test_hundred_thousand_requests_build_fast():
    start = time.perf_counter()
    w = build({**SHARED, "num_requests": 100_000, "num_prefixes": 1000})
    assert len(w) == 100_000
    sessions = build(
        {
            **MULTI,
            "num_sessions": 20_000,
            "arrival": {"kind": "poisson", "rate": 50.0},
            "turns": {"kind": "uniform", "low": 1, "high": 9},
            "think_s": {"kind": "exponential", "mean_s": 5.0},
            "first_prompt_tokens": {"kind": "lognormal", "mean": 2000, "median": 1000},
            "new_tokens": {"kind": "uniform", "low": 10, "high": 300},
            "output_tokens": {"kind": "uniform", "low": 10, "high": 500},
        }
    )
    assert len(sessions) > 95_000
    assert time.perf_counter() - start < 2.0


def test_duration_without_sessions_is_an_input_error():
    data = {**MULTI, "num_sessions": None, "duration_s": 0.5}
    with pytest.raises(InputError, match="duration_s"):
        build(data)
    assert len(build({**data, "duration_s": 2.5})) == 6  # sessions at 1 s and 2 s
