"""Lazy-decode equivalence: random configs stepped request by request and with the lazily
advanced decode lane (:mod:`simkv.engine.lazy`) give identical per-request, per-step and ITL
frames and summaries, under every victim policy, preemption mode and free-block reuse order
(each scheduler's default unless a test draws one)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simkv.config.sim import SimConfig
from simkv.metrics.summary import summarize
from tests.engine.helpers import build_engine


def _config(seed: int, rate: float, blocks: int, block_size: int, caching: str,
            budget: int, n: int, out_mean: int, kind: str = "vllm_v1", victim: str = "newest",
            mode: str = "auto", reuse: str | None = None,
            extra: dict[str, object] | None = None) -> SimConfig:  # fmt: skip
    scheduler = {"kind": kind, "max_num_batched_tokens": budget, **(extra or {})}
    if kind == "vllm_v1":
        scheduler["policy"] = "priority" if victim == "lowest_priority" else "fcfs"
    elif victim == "lowest_priority":  # a vllm_v1 policy only
        victim = "fewest_blocks"
    data = {
        "name": "ff", "seed": seed,
        "workload": {
            "kind": "shared_prefix", "num_requests": n,
            "arrival": {"kind": "gamma", "rate": rate, "cv": 2.0},
            "num_prefixes": 3, "prefix_tokens": {"kind": "uniform", "low": 16, "high": 200},
            "suffix_tokens": {"kind": "lognormal", "mean": 120, "median": 60, "max": 900},
            "output_tokens": {"kind": "lognormal", "mean": out_mean, "median": out_mean // 2,
                              "max": 600},
        },
        "model": {"preset": "llama-2-7b", "max_model_len": 1200},
        "gpu": "a100-40gb",
        "kv_cache": {"block_size": block_size, "num_blocks": blocks // block_size,
                     "prefix_caching": caching if kind == "vllm_v1" else "none",
                     "swap_space_gib": 0.25, **({"reuse": reuse} if reuse else {})},
        "scheduler": scheduler,
        "preemption": {"victim": victim, "mode": mode if kind == "vllm_v0" else "recompute"},
    }  # fmt: skip
    return SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))


def _run(cfg: SimConfig, base: Path, fast: bool):
    engine, sizing = build_engine(cfg, base, fast_forward=fast)
    engine.run()
    frames = engine.recorder.frames()
    return engine.fast_forward_steps, frames, summarize(frames, cfg.slo, sizing.num_blocks)


def _assert_same(cfg: SimConfig) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        windows, fast, fast_summary = _run(cfg, base, True)
        none, slow, slow_summary = _run(cfg, base, False)
    assert none == 0
    pd.testing.assert_frame_equal(fast.requests, slow.requests, check_exact=True)
    pd.testing.assert_frame_equal(fast.steps, slow.steps, check_exact=True)
    pd.testing.assert_frame_equal(fast.itl, slow.itl, check_exact=True)
    pd.testing.assert_frame_equal(fast.preemptions, slow.preemptions, check_exact=True)
    assert fast_summary == slow_summary
    return windows


@settings(max_examples=16, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 1000),
    rate=st.sampled_from([0.5, 3.0, 12.0]),
    blocks=st.integers(1280, 12000),  # token slots; blocks = slots // block_size
    block_size=st.sampled_from([1, 4, 16, 32]),
    caching=st.sampled_from(["none", "hash", "radix"]),
    budget=st.sampled_from([256, 2048, 8192]),
    out_mean=st.sampled_from([20, 120]),
    kind=st.sampled_from(["vllm_v1", "vllm_v0"]),
    victim=st.sampled_from(["newest", "oldest", "longest", "fewest_blocks", "lowest_priority"]),
    mode=st.sampled_from(["recompute", "swap"]),
    reuse=st.sampled_from([None, "fifo", "lifo"]),  # None: the scheduler's default
)
def test_fast_forward_changes_nothing(
    seed: int, rate: float, blocks: int, block_size: int, caching: str, budget: int,
    out_mean: int, kind: str, victim: str, mode: str, reuse: str | None,
) -> None:  # fmt: skip
    if kind == "vllm_v0":  # vLLM 0.6 refuses a budget below max_model_len (1200 here)
        budget = max(budget, 1200)
    _assert_same(_config(seed, rate, blocks, block_size, caching, budget, 60, out_mean, kind,
                         victim, mode, reuse))  # fmt: skip


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 1000),
    max_num_seqs=st.sampled_from([4, 16, 256]),
    threshold=st.sampled_from([0, 64, 300]),
    chunked=st.booleans(),
    caching=st.sampled_from(["none", "hash", "radix"]),
    reserve_full=st.booleans(),
)
def test_lazy_decode_matches_under_vllm_v1_limits(
    seed: int, max_num_seqs: int, threshold: int, chunked: bool, caching: str,
    reserve_full: bool,
) -> None:  # fmt: skip
    """Sequence limit, long-prefill threshold, chunked prefill off and the full-prompt
    reservation keep requests waiting while the cohort decodes."""
    extra = {"max_num_seqs": max_num_seqs, "enable_chunked_prefill": chunked,
             "long_prefill_token_threshold": threshold if chunked else 0,
             "reserve_full_prompt": reserve_full}  # fmt: skip
    budget = 2048 if chunked else 4096  # without chunking a prompt must fit the budget whole
    cfg = _config(seed, 6.0, 4000, 16, caching, budget, 80, 60, extra=extra)
    _assert_same(cfg)


@pytest.mark.parametrize("victim", ["newest", "longest"])
def test_lazy_decode_matches_with_full_prompt_reservation(victim: str) -> None:
    """vLLM 0.19's admission rule under tight memory: still preemptions, same frames."""
    cfg = _config(5, 6.0, 1600, 16, "hash", 2048, 120, 120, "vllm_v1", victim, "recompute",
                  extra={"reserve_full_prompt": True})  # fmt: skip
    assert _assert_same(cfg) > 100


@pytest.mark.parametrize("kind", ["vllm_v1", "vllm_v0"])
@pytest.mark.parametrize("victim", ["newest", "oldest", "longest", "lowest_priority"])
@pytest.mark.parametrize("caching", ["hash", "radix"])
def test_lazy_decode_matches_under_preemption(kind: str, victim: str, caching: str) -> None:
    """Tight memory: 30 to 60 preemptions per run (members are victims, or the cohort
    dissolves)."""
    mode = "swap" if victim == "oldest" else "recompute"
    cfg = _config(5, 6.0, 1600, 16, caching, 2048, 120, 120, kind, victim, mode)
    assert _assert_same(cfg) > 100


def test_fast_forward_engages_and_matches_under_memory_pressure() -> None:
    for kind in ("vllm_v1", "vllm_v0"):
        cfg = _config(3, 4.0, 4800, 16, "hash", 2048, 150, 120, kind)
        lazy = _assert_same(cfg)
        assert lazy > 500, kind  # the test is only meaningful if the cohort really ran
        with tempfile.TemporaryDirectory() as tmp:
            engine, _ = build_engine(cfg, Path(tmp))
            engine.run()
        assert engine.decode_run_steps > 500, kind  # ... and so did decode runs


@pytest.mark.parametrize("victim", ["oldest", "longest", "fewest_blocks"])
def test_lazy_decode_matches_where_what_if_victims_used_to_livelock(victim: str) -> None:
    """Memory for about one request, 32-token prefill chunks: the held victims
    (simkv.engine.schedulers.vllm_v1) change no frame between the lazy and the plain path."""
    from tests.engine.test_livelock import livelock_config

    for seed, n in ((17, 3), (44, 10), (3, 30)):
        data = livelock_config(victim, seed=seed, n=n)
        data["workload"]["output_tokens"] = {"kind": "uniform", "low": 20, "high": 200}
        data["model"]["max_model_len"] = 1024
        data["kv_cache"]["num_blocks"] = 70
        _assert_same(SimConfig.model_validate(data))


@pytest.mark.parametrize(
    "victim", ["newest", "oldest", "longest", "fewest_blocks", "lowest_priority"]
)
@pytest.mark.parametrize("threshold", [16, 64, 300])
def test_the_lane_keeps_members_out_of_reach_of_victim_policies(
    victim: str, threshold: int
) -> None:
    """vllm_v1 with long-prefill chunks under tight memory: under any victim policy but
    ``newest`` a member must never become a victim (``DecodeLane.others_fit`` makes the lane
    flush first), and the lane must still run in most steps."""
    extra = {"long_prefill_token_threshold": threshold, "max_num_seqs": 64}
    for seed in (5, 11):
        cfg = _config(seed, 6.0, 1600, 16, "hash", 2048, 60, 120, "vllm_v1", victim,
                      "recompute", extra=extra)  # fmt: skip
        assert _assert_same(cfg) > 100  # the lane really ran


@pytest.mark.parametrize("kind", ["vllm_v1", "vllm_v0"])
def test_checked_runs_keep_the_lane_on(kind: str) -> None:
    """Invariant checks after every step bring the members up to date instead of turning the
    fast path off: the lane and the decode runs still run, and the frames are the same."""
    cfg = _config(3, 4.0, 4800, 16, "hash", 2048, 150, 120, kind)
    with tempfile.TemporaryDirectory() as tmp:
        checked, _ = build_engine(cfg, Path(tmp), check_invariants=True)
        checked.run()
        plain, _ = build_engine(cfg, Path(tmp), fast_forward=False)
        plain.run()
    assert checked.fast_forward_steps > 500 and checked.decode_run_steps > 100
    a, b = checked.recorder.frames(), plain.recorder.frames()
    pd.testing.assert_frame_equal(a.steps, b.steps, check_exact=True)
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)


# -- vLLM 0.11's edge rules under lazy decoding (tests/engine/test_vllm_conformance.py) ------
@pytest.mark.parametrize("threshold", [0, 300])
def test_lazy_decode_matches_with_chunked_prefill_off(threshold: int) -> None:
    """Chunked prefill off, budget = max_model_len: long prompts wait over the budget left
    while the cohort decodes, set aside (0.11: shorter ones behind them go first) or stopping
    admission (0.32); with a threshold they run in threshold-sized chunks."""
    ttft = []
    for version in ("0.11", "0.32"):
        extra = {"enable_chunked_prefill": False, "long_prefill_token_threshold": threshold,
                 "vllm_version": version}  # fmt: skip
        cfg = _config(11, 100.0, 20000, 16, "hash", 1200, 150, 60, extra=extra)
        assert _assert_same(cfg) > 100
        with tempfile.TemporaryDirectory() as tmp:
            ttft.append(_run(cfg, Path(tmp), True)[2]["mean_ttft_ms"])
    if not threshold:  # the set-aside rule really ran: the versions differ
        assert ttft[0] != ttft[1]


def test_lazy_decode_matches_with_blocks_cached_as_allocated() -> None:
    """Bursts of requests on three shared prefixes: requests admitted in one step share the
    blocks an earlier one allocated in that step (vLLM 0.11's caching at allocation)."""
    cfg = _config(13, 200.0, 12000, 16, "hash", 8192, 150, 120)
    assert _assert_same(cfg) > 100
    with tempfile.TemporaryDirectory() as tmp:  # the rule ran: caching after the step differs
        engine, _ = build_engine(cfg, Path(tmp))
        engine.scheduler.kv.cache_on_alloc = False  # type: ignore[attr-defined]
        engine.run()
        after_step = engine.recorder.frames().steps.prefill_tokens.sum()
        computed = _run(cfg, Path(tmp), True)[1].steps.prefill_tokens.sum()
    assert computed < after_step


def test_lazy_decode_matches_under_the_priority_policy_default_victim() -> None:
    """``policy: priority`` with no victim set: vLLM's (priority, arrival) victim, under tight
    memory, with the lane on (members are never that victim unless ``others_fit`` allows)."""
    data = {
        "name": "ff", "seed": 9,
        "workload": {
            "kind": "synthetic", "num_requests": 120,
            "arrival": {"kind": "gamma", "rate": 6.0, "cv": 2.0},
            "prompt_tokens": {"kind": "lognormal", "mean": 200, "median": 120, "max": 900},
            "output_tokens": {"kind": "lognormal", "mean": 120, "median": 60, "max": 250},
            "priority": {"values": [0, 1, 2]},
        },
        "model": {"preset": "llama-2-7b", "max_model_len": 1200},
        "gpu": "a100-40gb",
        "kv_cache": {"block_size": 16, "num_blocks": 100},
        "scheduler": {"kind": "vllm_v1", "policy": "priority", "max_num_batched_tokens": 2048},
    }  # fmt: skip
    cfg = SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))
    assert cfg.preemption.victim == "lowest_priority"
    assert _assert_same(cfg) > 100
    with tempfile.TemporaryDirectory() as tmp:
        _, frames, _ = _run(cfg, Path(tmp), True)
    assert frames.requests["preemptions"].sum() > 0


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_lazy_decode_replays_vllm_v0_worst_case_decode_slots(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vllm_v0 under tight memory: a member may find no free block for a decode that fits in
    its own block (vLLM 0.6's ``can_append_slots`` worst case); the lane replays those steps
    member by member (``simkv.engine.lazy.shortage.replay_worst_case``, counted here) with the
    same frames as the plain pass."""
    from simkv.engine.lazy import cohort

    calls: list[int] = []
    replay = cohort.replay_worst_case

    def counted(lane: cohort.DecodeCohort, *args: Any) -> None:
        calls.append(lane.size)
        replay(lane, *args)

    monkeypatch.setattr(cohort, "replay_worst_case", counted)
    cfg = _config(5, 6.0, 1600, 16, "none", 2048, 120, 120, "vllm_v0", "newest", mode)
    assert _assert_same(cfg) > 1000
    assert len(calls) > 20
