"""The cache curve against a brute-force LRU cache of each capacity, and a hand-computed case."""

import sys
from collections import OrderedDict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.analysis.cache_curve import CURVE_COLUMNS, prefix_cache_curve
from simkv.workload.content import PromptContent, block_keys
from tests.conftest import load_benchmark


def brute_force(
    content: PromptContent, block_size: int, capacity: int, outputs: list[int] | None = None
) -> tuple[int, int]:
    """(hit prompt tokens, requests with a hit) of an LRU cache of ``capacity`` blocks fed the
    requests in order: lookup of at most (P - 1) // B leading blocks, then the P // B full
    blocks (with ``outputs``: (P + O - 1) // B blocks of prompt and output) inserted tail
    first (block 0 most recent)."""
    cache: OrderedDict[int, None] = OrderedDict()
    tokens = requests = 0
    for i in range(len(content)):
        segments = content.segments(i)
        prompt = sum(length for _, length in segments)
        cached = prompt if outputs is None else prompt + outputs[i] - 1
        keys = block_keys(segments, int(content.output_ids[i]), block_size, cached // block_size)
        hit = 0
        for key in keys[: (prompt - 1) // block_size]:
            if key not in cache:
                break
            hit += 1
        tokens += hit * block_size
        requests += hit > 0
        for key in reversed(keys):
            cache[key] = None
            cache.move_to_end(key)
            while len(cache) > capacity:
                cache.popitem(last=False)
    return tokens, requests


segment = st.tuples(st.integers(0, 3), st.integers(1, 12))
prompts = st.lists(st.lists(segment, min_size=1, max_size=4), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(prompts=prompts, block_size=st.integers(1, 5), data=st.data())
def test_curve_equals_brute_force_lru_at_every_capacity(prompts, block_size, data):
    n = len(prompts)
    # output ids among the prompts' segment ids: a later prompt may resend an answer
    output_ids = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    outputs = data.draw(st.none() | st.lists(st.integers(1, 9), min_size=n, max_size=n))
    content = PromptContent.from_lists(prompts, output_ids)
    curve = prefix_cache_curve(content, block_size, None if outputs is None else np.array(outputs))
    for capacity in range(curve.distinct_blocks + 2):
        row = curve.at(capacity)
        tokens, requests = brute_force(content, block_size, capacity, outputs)
        assert int(row["hit_tokens"]) == tokens, capacity
        assert round(row["request_hit_rate"] * len(prompts)) == requests, capacity
    total = int(content.prompt_tokens().sum())
    assert np.allclose(curve.table["hit_rate"], curve.table["hit_tokens"] / total)


def test_hand_computed_curve():
    # blocks of 2 tokens; A0 A1 = segment 1's two blocks, B = segment 2
    # r0 [1:4]       lookup (4-1)//2 = 1 block: A0 missing; insert A1, A0
    # r1 [1:4, 2:2]  lookup 2: A0 at distance 1, A1 at 2; insert B, A1, A0
    # r2 [1:2]       lookup 0 (its only block is its last token's); insert A0
    # r3 [1:4]       lookup 1 (a fully cached prompt recomputes its last block): A0 at 1
    content = PromptContent.from_lists([[(1, 4)], [(1, 4), (2, 2)], [(1, 2)], [(1, 4)]], [7] * 4)
    curve = prefix_cache_curve(content, 2)
    assert list(curve.table.columns) == list(CURVE_COLUMNS)
    assert curve.table["capacity_blocks"].tolist() == [0, 1, 2]
    assert curve.table["hit_tokens"].tolist() == [0, 4, 6]
    assert curve.table["hit_rate"].tolist() == [0, 4 / 16, 6 / 16]
    assert curve.table["request_hit_rate"].tolist() == [0, 0.5, 0.5]
    assert (curve.requests, curve.prompt_tokens) == (4, 16)
    assert (curve.block_accesses, curve.distinct_blocks) == (8, 3)
    assert curve.at(10)["hit_tokens"] == 6 and curve.max_hit_rate == 6 / 16


def test_cached_answers_let_the_next_turn_hit():
    # turn 1 resends turn 0's prompt and its 4-token answer (segment 9): blocks of 2 tokens
    content = PromptContent.from_lists([[(1, 4)], [(1, 4), (9, 4), (2, 2)]], [9, 10])
    prompt_only = prefix_cache_curve(content, 2)
    with_answers = prefix_cache_curve(content, 2, np.array([4, 3]))
    assert prompt_only.at(100)["hit_tokens"] == 4  # turn 0's two prompt blocks
    # turn 0 computed KV for 4 + 4 - 1 = 7 tokens: 3 full blocks, the answer's first block
    assert with_answers.at(100)["hit_tokens"] == 6
    assert with_answers.prompt_tokens == prompt_only.prompt_tokens == 14


def test_sampled_rows_are_exact_at_their_capacities():
    rng = np.random.default_rng(3)
    prompts = [[(int(rng.integers(0, 20)), int(rng.integers(1, 60)))] for _ in range(400)]
    curve = prefix_cache_curve(PromptContent.from_lists(prompts, range(50, 450)), 1)
    sampled = curve.sampled(40)
    assert len(curve.table) > 40 >= len(sampled)
    for _, row in sampled.iterrows():
        assert row["hit_tokens"] == curve.at(int(row["capacity_blocks"]))["hit_tokens"]
    assert curve.sampled(len(curve.table)) is curve.table


def test_benchmark_runs_and_only_prints(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    bench = load_benchmark("cache_curve")
    monkeypatch.setattr(sys, "argv", ["cache_curve.py", "--requests", "2000"])
    bench.main()
    assert "curve computed" in capsys.readouterr().out
    assert not list(tmp_path.iterdir())
