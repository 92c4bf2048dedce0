from pathlib import Path

import numpy as np
import pytest
from pydantic import TypeAdapter

from simkv.config.distributions import ExponentialThink, FixedThink, UniformThink
from simkv.config.workload import WorkloadConfig
from simkv.errors import InputError
from simkv.workload.build import build_workload, sample_think_s

ADAPTER = TypeAdapter(WorkloadConfig)


def build(data: dict, seed: int = 0, base_dir: Path = Path(".")):
    return build_workload(ADAPTER.validate_python(data), np.random.default_rng(seed), base_dir)


SYNTHETIC = {
    "kind": "synthetic",
    "num_requests": 2000,
    "arrival": {"kind": "gamma", "rate": 4.0, "cv": 2.0},
    "prompt_tokens": {"kind": "lognormal", "mean": 1500, "median": 1000, "max": 4096},
    "output_tokens": {"kind": "zipf", "a": 1.1, "low": 1, "high": 512},
    "priority": {"values": [0, 5], "weights": [3, 1]},
}


def test_synthetic_is_deterministic_per_seed():
    a, b, c = build(SYNTHETIC, 1), build(SYNTHETIC, 1), build(SYNTHETIC, 2)
    assert len(a) == 2000
    for name in ("arrival_s", "prompt_tokens", "output_tokens", "priority"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
        assert not np.array_equal(getattr(a, name), getattr(c, name))
    assert a.prompt_tokens.max() <= 4096
    assert set(a.priority.tolist()) == {0, 5}
    assert np.mean(a.priority == 0) == pytest.approx(0.75, abs=0.04)


def test_synthetic_constant_exact_and_duration_mode():
    data = {
        "kind": "synthetic",
        "duration_s": 2.0,
        "arrival": {"kind": "constant", "rate": 2.0},
        "prompt_tokens": {"kind": "fixed", "value": 10},
        "output_tokens": {"kind": "fixed", "value": 3},
    }
    w = build(data)
    assert w.arrival_s.tolist() == [0.5, 1.0, 1.5]
    assert w.prompt_tokens.tolist() == [10, 10, 10]
    assert w.priority.tolist() == [0, 0, 0]
    with pytest.raises(InputError, match="duration_s"):
        build({**data, "duration_s": 0.4})


def test_relative_paths_resolve_against_base_dir(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "pool.csv").write_text("n\n7\n")
    (tmp_path / "data" / "t.csv").write_text("prompt_tokens,output_tokens\n4,5\n6,7\n")
    data = {
        "kind": "synthetic",
        "num_requests": 3,
        "arrival": {"kind": "poisson", "rate": 1.0},
        "prompt_tokens": {"kind": "empirical", "path": "data/pool.csv", "column": "n"},
        "output_tokens": {"kind": "normal", "mean": 5, "std": 0},
    }
    w = build(data, base_dir=tmp_path)
    assert w.prompt_tokens.tolist() == [7, 7, 7]
    assert w.output_tokens.tolist() == [5, 5, 5]
    trace = {"kind": "trace", "path": "data/t.csv", "arrival": {"kind": "constant", "rate": 4}}
    t = build(trace, base_dir=tmp_path)
    assert t.arrival_s.tolist() == [0.25, 0.5]
    assert t.prompt_tokens.tolist() == [4, 6]
    with pytest.raises(InputError, match="set the workload's arrival process"):
        build({"kind": "trace", "path": "data/t.csv"}, base_dir=tmp_path)
    with pytest.raises(InputError, match="cannot read"):
        build({"kind": "trace", "path": "data/absent.csv"}, base_dir=tmp_path)


def test_trace_options_and_columns_pass_through(tmp_path):
    (tmp_path / "g.csv").write_text("t,p,o,prio\n0,1,1,3\n1,2,2,1\n2,3,3,2\n4,4,4,0\n")
    data = {
        "kind": "trace",
        "path": str(tmp_path / "g.csv"),
        "columns": {
            "arrival_s": "t",
            "prompt_tokens": "p",
            "output_tokens": "o",
            "priority": "prio",
        },
        "start_s": 1.0,
        "limit": 2,
        "time_scale": 3.0,
    }
    w = build(data)
    assert w.arrival_s.tolist() == [0.0, 3.0]
    assert w.prompt_tokens.tolist() == [2, 3]
    assert w.priority.tolist() == [1, 2]


def test_think_time_samplers():
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    assert sample_think_s(FixedThink(kind="fixed", value_s=1.5), rng, 3).tolist() == [1.5] * 3
    assert rng.bit_generator.state == state  # a fixed think time draws nothing
    uniform = sample_think_s(UniformThink(kind="uniform", low_s=2, high_s=3), rng, 5000)
    assert uniform.min() >= 2.0 and uniform.max() < 3.0
    expo = sample_think_s(ExponentialThink(kind="exponential", mean_s=4.0), rng, 20_000)
    assert expo.dtype == np.float64 and expo.min() >= 0
    assert expo.mean() == pytest.approx(4.0, rel=0.03)


def test_content_kinds_through_build():
    shared = build(
        {
            "kind": "shared_prefix",
            "duration_s": 2.0,
            "arrival": {"kind": "constant", "rate": 2.0},
            "num_prefixes": 1,
            "prefix_tokens": {"kind": "fixed", "value": 30},
            "suffix_tokens": {"kind": "fixed", "value": 4},
            "output_tokens": {"kind": "fixed", "value": 2},
        }
    )
    assert shared.arrival_s.tolist() == [0.5, 1.0, 1.5]
    assert [shared.content.segments(i) for i in range(3)] == [
        [(0, 30), (1, 4)],
        [(0, 30), (3, 4)],
        [(0, 30), (5, 4)],
    ]
    assert shared.source == "shared_prefix: 3 requests, 1 prefixes, constant arrivals"
