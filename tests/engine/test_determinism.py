"""Same config + seed → identical frames; a different seed → a different synthetic workload."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from simkv.config.sim import SimConfig
from simkv.run import simulate


def _synthetic(seed: int, scheduler: str) -> SimConfig:
    data = {
        "name": "det",
        "seed": seed,
        "workload": {
            "kind": "synthetic", "num_requests": 300,
            "arrival": {"kind": "gamma", "rate": 40.0, "cv": 2.0},
            "prompt_tokens": {"kind": "lognormal", "mean": 300, "median": 200, "max": 2000},
            "output_tokens": {"kind": "uniform", "low": 1, "high": 300},
        },
        "model": "llama-2-7b",
        "gpu": "a100-40gb",
        "kv_cache": {"num_blocks": 600},
        "scheduler": {"kind": scheduler},
    }  # fmt: skip
    return SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))


def test_same_seed_same_frames(tmp_path: Path) -> None:
    for scheduler in ("vllm_v1", "vllm_v0", "orca", "static"):
        a = simulate(_synthetic(7, scheduler), tmp_path)
        b = simulate(_synthetic(7, scheduler), tmp_path)
        pd.testing.assert_frame_equal(a.frames.requests, b.frames.requests)
        pd.testing.assert_frame_equal(a.frames.steps, b.frames.steps)
        pd.testing.assert_frame_equal(a.frames.itl, b.frames.itl)
        pd.testing.assert_frame_equal(a.frames.preemptions, b.frames.preemptions)
        assert a.summary == b.summary


def test_other_seed_other_workload(tmp_path: Path) -> None:
    a = simulate(_synthetic(1, "vllm_v1"), tmp_path).frames.requests
    b = simulate(_synthetic(2, "vllm_v1"), tmp_path).frames.requests
    assert not a["prompt_tokens"].equals(b["prompt_tokens"])
