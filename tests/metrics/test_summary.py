"""Weighted ITL percentiles; vLLM benchmark extras (std, chosen percentiles, totals, peaks)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simkv.config.sim import SLOConfig
from simkv.metrics.recorder import RunFrames
from simkv.metrics.summary import (
    _itl_stats,
    _peaks,
    latency_stats,
    percentile_label,
    summarize,
    weighted_percentiles,
)

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


def _frames() -> RunFrames:
    """Three finished requests (hand-made): arrivals 0, 0.5, 2.5 s; one still in at 2.5 s."""
    requests = pd.DataFrame({
        "arrival_s": [0.0, 0.5, 2.5], "first_scheduled_s": [0.0, 0.5, 2.5],
        "first_token_s": [0.1, 0.7, 2.6], "finish_s": [1.1, 2.7, 3.6],
        "prompt_tokens": [10, 20, 30], "output_tokens": [3, 5, 2], "generated_tokens": [3, 5, 2],
        "num_seqs": [1, 1, 1], "truncated": [False] * 3, "preemptions": [0] * 3,
        "recomputed_tokens": [0] * 3, "swapped_bytes": [0] * 3, "prefix_hit_tokens": [0] * 3,
        "cache_hit_tokens": [0] * 3, "status": ["finished"] * 3,
    })  # fmt: skip
    # steps ending at 0.2, 0.4, 1.2 and 3.0 s with 4, 1, 2 and 3 decode tokens
    steps = pd.DataFrame({"time_s": [0.1, 0.3, 1.0, 2.9], "duration_s": [0.1, 0.1, 0.2, 0.1],
                          "decode_tokens": [4, 1, 2, 3], "evictions": [0] * 4})  # fmt: skip
    itl = pd.DataFrame({"itl_s": [0.01, 0.03], "count": [3, 1]})
    return RunFrames(requests, steps, itl)


def test_vllm_benchmark_extras() -> None:
    frames = _frames()
    out: dict[str, float | None] = {}
    _peaks(frames.requests, frames.steps, out)
    # window [0, 1): decode 4 + 1 at 0.2 and 0.4, first tokens at 0.1 and 0.7 → 7
    assert out["max_output_tokens_per_s"] == 7
    assert out["max_concurrent_requests"] == 2  # 0.5–1.1 s; the third arrives at 2.5 < 2.7
    e2el = np.array([1.1, 2.2, 1.1]) * 1e3
    stats: dict[str, float | None] = {}
    latency_stats("e2el", e2el, stats, (50.0, 99.9))
    assert list(stats) == [f"{k}_e2el_ms" for k in
                           ("mean", "median", "std", "p50", "p90", "p99", "p99.9")]  # fmt: skip
    assert stats["std_e2el_ms"] == pytest.approx(float(np.std(e2el)))
    assert stats["p99.9_e2el_ms"] == pytest.approx(float(np.percentile(e2el, 99.9)))
    itl: dict[str, float | None] = {}
    _itl_stats(frames.itl, itl, ())
    assert itl["std_itl_ms"] == pytest.approx(float(np.std([10, 10, 10, 30])))


def test_percentile_labels_follow_vllm() -> None:
    assert [percentile_label(q) for q in (50.0, 99.0, 99.9, 99.99)] == [
        "p50", "p99", "p99.9", "p99.99",
    ]  # fmt: skip


def test_summary_has_the_totals() -> None:
    frames = _frames()
    steps = frames.steps.assign(**{c: 0 for c in ("blocks_used", "cached_blocks", "shared_slots",
                                                   "token_slots", "reserved_slots",
                                                   "internal_frag_slots", "external_frag_slots")},
                                free_slots=1)  # fmt: skip
    summary = summarize(RunFrames(frames.requests, steps, frames.itl), SLOConfig(), 10)
    assert summary["total_input_tokens"] == 60
    assert summary["total_output_tokens"] == 10
