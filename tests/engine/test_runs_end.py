"""Every valid config ends: random schedulers, victims, memory sizes and workloads finish in a
bounded number of steps, with the output invariants (none stalls: a config that could is
refused at start-up). ``make fuzz`` runs the long variant."""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from simkv.config.sim import SimConfig
from simkv.errors import InputError
from tests.engine.helpers import build_engine
from tests.engine.test_livelock import LIVELOCKS

SCHEDULERS = st.one_of(
    st.fixed_dictionaries({
        "kind": st.just("vllm_v1"),
        "max_num_batched_tokens": st.sampled_from([16, 64, 256, 2048]),
        "long_prefill_token_threshold": st.sampled_from([0, 0, 32]),
        "enable_chunked_prefill": st.sampled_from([True, True, False]),
        "max_num_seqs": st.sampled_from([2, None]),  # None: min(256, budget), as vLLM
    }),
    st.fixed_dictionaries({"kind": st.just("vllm_v0"), "watermark": st.sampled_from([0.0, 0.01])}),
    st.fixed_dictionaries({"kind": st.just("orca"),
                           "reservation": st.sampled_from(["max", "pow2", "oracle"])}),
    st.fixed_dictionaries({"kind": st.just("static"), "max_batch_size": st.sampled_from([2, 64])}),
)  # fmt: skip


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid config whose KV cache holds one request of ``max_model_len`` and a bit more."""
    max_len = draw(st.sampled_from([128, 256, 512]))
    block_size = draw(st.sampled_from([1, 4, 16]))
    slots = int(max_len * draw(st.sampled_from([1.0, 1.3, 2.0, 4.0])))
    prompt = draw(st.integers(8, max_len))
    scheduler = draw(SCHEDULERS)
    victim = draw(st.sampled_from(["newest", "oldest", "longest", "fewest_blocks"]))
    if scheduler["kind"] == "vllm_v1":
        if scheduler.pop("max_num_seqs") is not None:
            scheduler["max_num_seqs"] = 2
        if not scheduler["enable_chunked_prefill"]:  # vLLM refuses a budget below max_len
            scheduler["max_num_batched_tokens"] = max(scheduler["max_num_batched_tokens"], max_len)
        slots += block_size  # vLLM V1's null block
    if scheduler["kind"] == "vllm_v1" and draw(st.booleans()):
        scheduler["policy"], victim = "priority", "lowest_priority"
    return {
        "name": "ends", "seed": draw(st.integers(0, 99)),
        "workload": {
            "kind": "synthetic", "num_requests": draw(st.integers(1, 30)),
            "arrival": {"kind": "poisson", "rate": draw(st.sampled_from([1.0, 100.0, 1e4]))},
            "prompt_tokens": {"kind": "uniform", "low": max(1, prompt // 2), "high": prompt},
            "output_tokens": {"kind": "uniform", "low": 1, "high": max_len},
        },
        "model": {"preset": "llama-2-7b", "max_model_len": max_len},
        "gpu": "a100-80gb",
        "kv_cache": {"block_size": block_size, "num_blocks": -(-slots // block_size)},
        "scheduler": scheduler,
        "preemption": {"victim": victim, "mode": "recompute"},
    }  # fmt: skip


class _TooLong(Exception):
    pass


def _expire(_signum: int, _frame: object) -> None:
    raise _TooLong("the run did not end within 30 s")


def _check_ends(data: dict[str, Any]) -> None:
    cfg = SimConfig.model_validate(data)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            engine, sizing = build_engine(cfg, Path(tmp))
        except InputError:
            assume(False)  # a config that can only stall is refused at start-up (tested apart)
        previous = signal.signal(signal.SIGALRM, _expire)
        signal.alarm(30)
        try:
            engine.run()  # (no valid config of these schedulers can stall: SimulationStalled)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    frames, n = engine.recorder.frames(), data["workload"]["num_requests"]
    req, steps = frames.requests, frames.steps
    tokens = int((req.prompt_tokens + req.output_tokens).sum())
    assert len(steps) <= 50 * tokens + 1000  # bounded: no livelock
    assert sorted(req.req_id) == list(range(n))  # every request accounted once
    done = req[req.status == "finished"]
    assert (done.first_token_s >= done.arrival_s).all()
    assert (done.finish_s >= done.first_token_s).all()
    assert (done.generated_tokens == done.output_tokens).all()  # output as truncated at intake
    assert (done.prompt_tokens + done.output_tokens <= data["model"]["max_model_len"]).all()
    assert set(req.status) <= {"finished", "rejected", "aborted"}
    if "blocks_used" in steps and data["scheduler"]["kind"].startswith("vllm"):
        assert (steps.blocks_used <= sizing.num_blocks).all()  # KV usage <= 1


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=configs())
@example(data=LIVELOCKS[0])  # the configs that livelocked under oldest / longest victims
@example(data=LIVELOCKS[1])
def test_every_valid_config_ends_with_the_output_invariants(data: dict[str, Any]) -> None:
    _check_ends(data)


@pytest.mark.fuzz
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=configs())
def test_every_valid_config_ends_long(data: dict[str, Any]) -> None:
    _check_ends(data)
