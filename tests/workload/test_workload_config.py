from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from simkv.config.base import Frozen, parse_yaml, validate
from simkv.config.distributions import ExponentialThink, GammaArrival, LognormalLength
from simkv.config.workload import (
    MultiTurnWorkload,
    SharedPrefixWorkload,
    SyntheticWorkload,
    TraceWorkload,
    WorkloadConfig,
)
from simkv.errors import InputError

ADAPTER = TypeAdapter(WorkloadConfig)

SYNTHETIC = {
    "kind": "synthetic",
    "num_requests": 10,
    "arrival": {"kind": "poisson", "rate": 2.0},
    "prompt_tokens": {"kind": "fixed", "value": 100},
    "output_tokens": {"kind": "uniform", "low": 1, "high": 50},
}


def synthetic(**changes) -> dict:
    return {**SYNTHETIC, **changes}


def rejects(data: dict, fragment: str) -> None:
    with pytest.raises(ValidationError) as err:
        ADAPTER.validate_python(data)
    assert fragment in str(err.value)


def test_discriminated_union_picks_the_model():
    cfg = ADAPTER.validate_python(synthetic(arrival={"kind": "gamma", "rate": 1.0, "cv": 2.0}))
    assert isinstance(cfg, SyntheticWorkload)
    assert isinstance(cfg.arrival, GammaArrival)
    assert cfg.priority is None
    trace = ADAPTER.validate_python({"kind": "trace", "path": "t.csv"})
    assert isinstance(trace, TraceWorkload)
    assert (trace.format, trace.time_scale, trace.rate, trace.arrival) == ("auto", 1.0, None, None)
    assert trace.path == Path("t.csv")


def test_schedule_validation():
    ok = synthetic(arrival={"kind": "constant", "schedule": [[0, 1.0], [60, 0], [120, 3.0]]})
    assert ADAPTER.validate_python(ok).arrival.schedule == [(0, 1.0), (60, 0), (120, 3.0)]
    rejects(synthetic(arrival={"kind": "poisson"}), "exactly one of rate and schedule")
    rejects(
        synthetic(arrival={"kind": "poisson", "rate": 1.0, "schedule": [[0, 1.0]]}),
        "exactly one of rate and schedule",
    )
    rejects(synthetic(arrival={"kind": "poisson", "schedule": [[5, 1.0]]}), "start at 0")
    rejects(
        synthetic(arrival={"kind": "poisson", "schedule": [[0, 1], [0, 2]]}), "strictly increase"
    )
    rejects(synthetic(arrival={"kind": "poisson", "schedule": [[0, 0]]}), "not all be 0")
    rejects(
        synthetic(arrival={"kind": "poisson", "schedule": [[0, 1], [9, 0]]}),
        "must not end at rate 0",
    )
    ends = synthetic(
        num_requests=None,
        duration_s=20.0,
        arrival={"kind": "poisson", "schedule": [[0, 1], [9, 0]]},
    )
    assert ADAPTER.validate_python(ends).duration_s == 20.0
    rejects(synthetic(arrival={"kind": "gamma", "rate": 1.0}), "cv")
    rejects(synthetic(arrival={"kind": "bursty", "rate": 1.0}), "bursty")


def test_size_and_length_validation():
    rejects(synthetic(duration_s=5.0), "exactly one of num_requests and duration_s")
    rejects(synthetic(num_requests=None), "exactly one of num_requests and duration_s")
    rejects(synthetic(prompt_tokens={"kind": "uniform", "low": 5, "high": 4}), "high (4)")
    rejects(
        synthetic(prompt_tokens={"kind": "fixed", "value": 5, "min": 9, "max": 4}),
        "max (4) must be ≥ min (9)",
    )
    rejects(synthetic(prompt_tokens={"kind": "fixed", "value": 0}), "greater than or equal to 1")
    rejects(synthetic(prompt_tokens={"kind": "fixed", "value": 2**40}), "less than or equal")
    rejects(synthetic(prompt_tokens={"kind": "zipf", "a": 1.0, "high": 10**8}), "10^7")
    rejects(synthetic(prompt_tokens={"kind": "fixed", "value": 5, "typo": 1}), "Extra inputs")


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"mean": 3.0, "median": 2.0}, None),
        ({"mu": 6.0, "sigma": 1.0}, None),
        ({"mean": 3.0, "sigma": 1.0}, "exactly one pair"),
        ({"mean": 3.0}, "exactly one pair"),
        ({"mean": 3.0, "median": 2.0, "mu": 1.0}, "exactly one pair"),
        ({"mean": 1.0, "median": 2.0}, "mean must be ≥ median"),
    ],
)
def test_lognormal_needs_one_pair(fields, error):
    data = synthetic(output_tokens={"kind": "lognormal", **fields})
    if error is None:
        assert isinstance(ADAPTER.validate_python(data).output_tokens, LognormalLength)
    else:
        rejects(data, error)


def test_priority_weights():
    cfg = ADAPTER.validate_python(synthetic(priority={"values": [0, 1], "weights": [3, 1]}))
    assert cfg.priority.weights == [3.0, 1.0]
    rejects(synthetic(priority={"values": [0, 1], "weights": [1]}), "one entry per value")
    rejects(synthetic(priority={"values": [0], "weights": [0]}), "not all be 0")
    rejects(synthetic(priority={"values": []}), "at least 1")


def test_trace_validation():
    rejects(
        {"kind": "trace", "path": "t.csv", "rate": 2.0, "time_scale": 2.0},
        "at most one of rate and time_scale",
    )
    rejects({"kind": "trace", "path": "t.csv", "start_s": 5, "end_s": 5}, "end_s must be")
    rejects({"kind": "trace", "path": "t.csv", "format": "lengths"}, "set arrival")
    rejects(
        {"kind": "trace", "path": "t.csv", "format": "azure", "columns": {}}, "only to the generic"
    )
    rejects(
        {"kind": "trace", "path": "t.csv", "columns": {"arrival_s": "a", "arrival_ms": "b"}},
        "at most one of arrival_s and arrival_ms",
    )
    rejects({"kind": "trace", "path": "t.csv", "limit": 0}, "greater than 0")


class Holder(Frozen):
    workload: WorkloadConfig


def test_yaml_error_names_line_and_key():
    text = (
        "workload:\n"
        "  kind: synthetic\n"
        "  num_requests: 10\n"
        "  arrival: {kind: poisson, rate: 1.0}\n"
        "  prompt_tokens:\n"
        "    kind: normal\n"
        "    mean: 100\n"
        "    std: -1\n"
        "  output_tokens: {kind: fixed, value: 5}\n"
    )
    with pytest.raises(InputError) as err:
        validate(Holder, parse_yaml(text, "w.yaml"))
    assert str(err.value).startswith("w.yaml:8 workload.prompt_tokens.std:")


SHARED_PREFIX = {
    "kind": "shared_prefix",
    "num_requests": 10,
    "arrival": {"kind": "poisson", "rate": 2.0},
    "num_prefixes": 3,
    "prefix_tokens": {"kind": "fixed", "value": 100},
    "suffix_tokens": {"kind": "fixed", "value": 10},
    "output_tokens": {"kind": "fixed", "value": 5},
}
MULTI_TURN = {
    "kind": "multi_turn",
    "num_sessions": 4,
    "arrival": {"kind": "poisson", "rate": 2.0},
    "turns": {"kind": "uniform", "low": 1, "high": 4},
    "think_s": {"kind": "exponential", "mean_s": 3.0},
    "first_prompt_tokens": {"kind": "fixed", "value": 100},
    "new_tokens": {"kind": "fixed", "value": 10},
    "output_tokens": {"kind": "fixed", "value": 5},
}


def test_content_kinds_and_defaults():
    shared = ADAPTER.validate_python(SHARED_PREFIX)
    assert isinstance(shared, SharedPrefixWorkload)
    assert shared.zipf_a == 1.0
    multi = ADAPTER.validate_python(MULTI_TURN)
    assert isinstance(multi, MultiTurnWorkload)
    assert isinstance(multi.think_s, ExponentialThink)
    assert multi.max_prompt_tokens == 32768
    fixed = {**MULTI_TURN, "think_s": {"kind": "fixed", "value_s": 0}}
    assert ADAPTER.validate_python(fixed).think_s.value_s == 0.0


def test_content_kind_validation():
    rejects({**SHARED_PREFIX, "duration_s": 3.0}, "exactly one of num_requests and duration_s")
    rejects({**SHARED_PREFIX, "num_prefixes": 0}, "greater than 0")
    rejects({**SHARED_PREFIX, "zipf_a": -1.0}, "greater than or equal to 0")
    rejects({**MULTI_TURN, "num_sessions": None}, "exactly one of num_sessions and duration_s")
    rejects({**MULTI_TURN, "max_prompt_tokens": 0}, "greater than or equal to 1")
    rejects({**MULTI_TURN, "think_s": {"kind": "fixed", "value_s": -1}}, "greater than or equal")
    rejects({**MULTI_TURN, "think_s": {"kind": "exponential", "mean_s": 0}}, "greater than 0")
    rejects(
        {**MULTI_TURN, "think_s": {"kind": "uniform", "low_s": 2, "high_s": 1}},
        "high_s (1.0) must be ≥ low_s (2.0)",
    )
    rejects({**MULTI_TURN, "think_s": {"kind": "gamma", "mean_s": 1}}, "gamma")
    ends = {**MULTI_TURN, "arrival": {"kind": "poisson", "schedule": [[0, 1], [9, 0]]}}
    rejects(ends, "with num_sessions, the arrival schedule must not end at rate 0")
