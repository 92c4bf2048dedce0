"""Pulled arrivals (:mod:`simkv.engine.arrival_feed`) are delivered exactly when a SimPy
arrival process would deliver them, ties at a step's start included, and engines with and
without the feed give identical frames."""

from __future__ import annotations

import dataclasses
import math
import tempfile
from array import array
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import simpy
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simkv.config.sim import SimConfig
from simkv.engine.arrival_feed import NOTHING, ArrivalFeed, ArrivalProcess
from simkv.engine.engine import Environment
from simkv.engine.request.plan import StepPlan
from simkv.metrics.summary import summarize
from simkv.workload.build import build_workload
from tests.engine.helpers import build_engine

GRID = 1 / 64  # step times and arrivals on a binary grid: exact sums, many ties


def _with_process(times: list[float], steps: list[float]) -> list[tuple[float, list[int]]]:
    """Which arrivals a step process sees at each step start, with the SimPy arrival process
    (:class:`ArrivalProcess`, delivering as ``Engine.deliver`` does); each step lasts the next
    of ``steps`` (0: idle wait)."""
    env = simpy.Environment()
    inbox: list[int] = []
    seen: list[tuple[float, list[int]]] = []
    wake: list[simpy.Event] = []

    def deliver(i: int, _t: float) -> None:
        inbox.append(i)
        if wake and not wake[0].triggered:
            wake[0].succeed()

    def stepper():  # type: ignore[no-untyped-def]
        for duration in steps:
            seen.append((env.now, list(inbox)))
            inbox.clear()
            if duration:
                yield env.timeout(duration)
            elif len(seen_total(seen)) < len(times):  # idle until the next arrival
                wake[:] = [env.event()]
                yield wake[0]
        seen.append((env.now, list(inbox)))

    env.process(ArrivalProcess(array("d", times), range(len(times))).run(env, deliver))
    env.process(stepper())
    env.run()
    return seen


def seen_total(seen: list[tuple[float, list[int]]]) -> list[int]:
    return [i for _, got in seen for i in got]


def _with_feed(times: list[float], steps: list[float]) -> list[tuple[float, list[int]]]:
    """The same with :class:`ArrivalFeed` pulled by the step process alone."""
    env = Environment()
    feed = ArrivalFeed(array("d", times), range(len(times)))
    seen: list[tuple[float, list[int]]] = []
    state = {"resume": 0}

    def stepper():  # type: ignore[no-untyped-def]
        for duration in [*steps, None]:
            got = feed.take(env.now, state["resume"])
            seen.append((env.now, got))
            if duration is None:
                return
            if duration:
                yield env.timeout(duration)
            elif len(seen_total(seen)) < len(times):
                yield env.timeout_at(feed.fire_s)
            else:
                continue  # no yield: still the same resume
            state["resume"] += 1

    env.process(stepper())
    env.run()
    return seen


@settings(max_examples=300, deadline=None)
@given(
    gaps=st.lists(st.sampled_from([0, 0, 1, 2, 3, 5, 0.37, 1.1]), min_size=1, max_size=40),
    durations=st.lists(st.sampled_from([0, 1, 2, 3, 0.5, 0.77]), min_size=1, max_size=60),
    start=st.sampled_from([0.0, 1.0, 0.1]),
)
def test_feed_delivers_like_an_arrival_process(
    gaps: list[float], durations: list[float], start: float
) -> None:
    times = list(np.cumsum([start] + [g * GRID * 8 for g in gaps[1:]]) + 0.0)
    steps = [d * GRID * 8 for d in durations]
    assert _with_feed(times, steps) == _with_process(times, steps)


def test_ties_happen_in_the_property_test_setting() -> None:
    """Arrivals exactly at a step's start, each way round (the property test's point)."""
    times = [0.0, 0.125, 0.25, 0.25, 0.5]
    steps = [0.125, 0.125, 0.25, 0.0]
    want = _with_process(times, steps)
    assert _with_feed(times, steps) == want
    assert [t for t, got in want if got] == [0.0, 0.125, 0.25, 0.5]


def test_feed_rounds_fire_times_as_simpy_does() -> None:
    feed = ArrivalFeed(array("d", [0.254, 5.668, 5.668]), range(3))
    assert feed.fire_s == 0.254
    assert feed.take(0.254, 1) == [0]  # its timeout was created before the step process ran
    fire = 0.254 + (5.668 - 0.254)  # the float a timeout of t - now ends at
    assert feed.fire_s == fire < 5.668
    assert feed.take(fire, 1) == []  # created in resume 1, after the event that woke resume 1
    assert feed.take(fire, 2) == [1, 2] and feed.fire_s == NOTHING


def test_timeout_at_ends_exactly_where_a_plain_timeout_misses() -> None:
    env = Environment()
    now, when = 0.09625, 0.67125
    assert not any(now + d == when for d in (when - now, *_neighbours(when - now)))
    env.run(until=now)
    done = env.timeout_at(when)
    env.run(until=done)
    assert env.now == when
    with pytest.raises(ValueError, match="before now"):
        env.timeout_at(0.0)


def _neighbours(d: float) -> list[float]:
    return [math.nextafter(d, math.inf), math.nextafter(d, -math.inf)]


def _config(seed: int, kind: str, rate: float, caching: str) -> SimConfig:
    data = {
        "name": "feed", "seed": seed,
        "workload": {
            "kind": "synthetic", "num_requests": 120,
            "arrival": {"kind": "gamma", "rate": rate, "cv": 2.0},
            "prompt_tokens": {"kind": "lognormal", "mean": 300, "median": 150, "max": 900},
            "output_tokens": {"kind": "lognormal", "mean": 60, "median": 30, "max": 300},
        },
        "model": {"preset": "llama-2-7b", "max_model_len": 1200},
        "gpu": "a100-40gb",
        "kv_cache": {"block_size": 16, "num_blocks": 300,
                     "prefix_caching": caching if kind == "vllm_v1" else "none"},
        "scheduler": {"kind": kind, "max_num_batched_tokens": 2048},
    }  # fmt: skip
    return SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))


class _GridCost:
    """Step times on the grid (exact sums), so arrivals on it tie with step starts."""

    def step_time_s(self, work: StepPlan) -> float:
        return (1 + (work.prefill_tokens + work.decode_tokens) // 256) * GRID

    def swap_time_s(self, num_blocks: int) -> float:
        return num_blocks * GRID

    def copy_time_s(self, num_blocks: int) -> float:
        return num_blocks * GRID


def _frames(cfg: SimConfig, base: Path, pull: bool, grid: bool):  # type: ignore[no-untyped-def]
    workload = build_workload(cfg.workload, np.random.default_rng(cfg.seed), base)
    if grid:
        snapped = np.floor(workload.arrival_s / GRID) * GRID
        workload = dataclasses.replace(workload, arrival_s=snapped)
    engine, sizing = build_engine(cfg, base, workload=workload, pull_arrivals=pull)
    assert (engine._feed is not None) == pull
    if grid:
        engine.cost = _GridCost()
    engine.run()
    frames = engine.recorder.frames()
    return frames, summarize(frames, cfg.slo, sizing.num_blocks)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 1000),
    kind=st.sampled_from(["vllm_v1", "vllm_v0"]),
    rate=st.sampled_from([0.5, 8.0, 40.0]),
    caching=st.sampled_from(["none", "hash"]),
    grid=st.booleans(),
)
def test_engine_frames_are_the_same_with_the_feed(
    seed: int, kind: str, rate: float, caching: str, grid: bool
) -> None:
    cfg = _config(seed, kind, rate, caching)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (pulled, pulled_summary), (process, process_summary) = (
            _frames(cfg, base, pull, grid) for pull in (True, False)
        )
    pd.testing.assert_frame_equal(pulled.requests, process.requests, check_exact=True)
    pd.testing.assert_frame_equal(pulled.steps, process.steps, check_exact=True)
    pd.testing.assert_frame_equal(pulled.itl, process.itl, check_exact=True)
    assert pulled_summary == process_summary
