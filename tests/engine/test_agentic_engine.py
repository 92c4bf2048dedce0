"""Agentic sessions through the engine: subagents arrive when their parent's answer is done;
the next call waits for all of them, then its tool time (closed loop on the join)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simkv.config.sim import SimConfig
from simkv.run.simulate import simulate
from simkv.workload.build import build_workload


def _cfg() -> SimConfig:
    data = {
        "name": "agents", "seed": 3,
        "workload": {
            "kind": "agentic", "num_sessions": 6, "arrival": {"kind": "poisson", "rate": 2.0},
            "calls": {"kind": "uniform", "low": 2, "high": 5}, "system_prompt_tokens": 300,
            "task_tokens": {"kind": "uniform", "low": 10, "high": 200},
            "output_tokens": {"kind": "uniform", "low": 5, "high": 60},
            "tool_s": {"kind": "fixed", "value_s": 0.5},
            "tool_output_tokens": {"kind": "uniform", "low": 10, "high": 300},
            "fanout": {
                "probability": 0.5, "children": {"kind": "uniform", "low": 1, "high": 3},
                "child_tokens": {"kind": "uniform", "low": 5, "high": 50},
                "child_output_tokens": {"kind": "uniform", "low": 5, "high": 80},
            },
        },
        "model": "llama-2-7b", "gpu": "a100-80gb",
        "kv_cache": {"block_size": 16, "prefix_caching": "hash"},
        "scheduler": {"kind": "vllm_v1"},
    }  # fmt: skip
    return SimConfig.model_validate(data)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_children_follow_the_parent_and_the_join_waits_for_all(tmp_path: Path, fast_forward):
    cfg = _cfg()
    w = build_workload(cfg.workload, np.random.default_rng(cfg.seed), tmp_path)
    req = simulate(cfg, tmp_path, fast_forward=fast_forward).requests.set_index("req_id")
    assert len(req) == len(w)
    arrive, finish = req["arrival_s"], req["finish_s"]
    waves = 0
    for s in np.unique(w.session_id):
        rows = np.flatnonzero(w.session_id == s)
        turns = w.turn[rows]
        for t in range(1, int(turns.max()) + 1):
            prev, cur = rows[turns == t - 1], rows[turns == t]
            last = finish[prev].max()
            expected = last + w.think_s[cur]
            np.testing.assert_allclose(arrive[cur], expected, rtol=0, atol=1e-9)
            waves += len(prev) > 1
    assert waves > 0  # some joins waited for several subagents
    assert req["cache_hit_tokens"].sum() > 0.8 * req["prompt_tokens"].sum() - 300 * 6


def test_same_seed_identical_frames(tmp_path: Path):
    a, b = simulate(_cfg(), tmp_path), simulate(_cfg(), tmp_path)
    assert a.requests.equals(b.requests) and a.steps.equals(b.steps)


def test_lazy_and_plain_runs_agree_and_invariants_hold(tmp_path: Path):
    lazy = simulate(_cfg(), tmp_path)
    plain = simulate(_cfg(), tmp_path, fast_forward=False, check_invariants=True)
    pd.testing.assert_frame_equal(lazy.requests, plain.requests, check_exact=True)
    pd.testing.assert_frame_equal(lazy.steps, plain.steps, check_exact=True)
