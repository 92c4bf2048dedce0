"""Busy time and model FLOPs utilisation of a run (simkv.metrics.utilisation), hand-computed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simkv.config.hardware import ModelSpec
from simkv.metrics.recorder import RunFrames
from simkv.metrics.utilisation import ReplicaCompute, utilisation, utilisation_summary
from simkv.presets import read_preset


def _frames() -> RunFrames:
    """Two replicas over a 10 s span (arrival at 0, last completion at 10): replica 0 steps
    for 2 + 3 s, replica 1 for 1 s; 100 + 10 tokens, 1 + 2 sequences, 20 tokens, 1 sequence."""
    requests = pd.DataFrame({"arrival_s": [0.0, 1.0], "finish_s": [10.0, 4.0]})
    steps = pd.DataFrame({
        "time_s": [0.0, 5.0, 1.0], "duration_s": [2.0, 3.0, 1.0],
        "prefill_tokens": [100, 0, 20], "decode_tokens": [0, 10, 0],
        "batch_size": [1, 2, 1], "replica": [0, 0, 1],
    })  # fmt: skip
    return RunFrames(requests=requests, steps=steps, itl=pd.DataFrame())


def test_busy_time_and_mfu_by_hand() -> None:
    """FLOPs: replica 0: 110 tokens × 4 + 3 seqs × 10 = 470; replica 1: 20 × 4 + 10 = 90.
    Peaks 100 and 50 FLOP/s over 10 s: MFU 0.47 and 0.18; the run's 56 / 150."""
    replicas = [ReplicaCompute(4.0, 10.0, 100.0), ReplicaCompute(4.0, 10.0, 50.0)]
    used = utilisation(_frames(), replicas)
    assert used.span_s == 10.0
    np.testing.assert_allclose(used.busy_frac, [0.5, 0.1])
    np.testing.assert_allclose(used.mfu_frac, [0.47, 0.18])
    summary = utilisation_summary(used)
    assert summary["model_flops_per_s"] == pytest.approx(56.0)
    assert summary["mfu_frac"] == pytest.approx(56.0 / 150.0)
    assert summary["mean_busy_frac"] == pytest.approx(0.3)
    assert summary["max_busy_frac"] == pytest.approx(0.5)


def test_a_step_after_the_last_completion_extends_the_span() -> None:
    frames = _frames()
    frames.steps.loc[1, "time_s"] = 18.0  # ends at 21 s, after the last completion (10 s)
    used = utilisation(frames, [ReplicaCompute(1.0, 0.0, 1.0)] * 2)
    assert used.span_s == 21.0


def test_no_steps_is_no_span() -> None:
    frames = RunFrames(requests=pd.DataFrame({"arrival_s": [], "finish_s": []}),
                       steps=_frames().steps.iloc[:0], itl=pd.DataFrame())  # fmt: skip
    summary = utilisation_summary(utilisation(frames, [ReplicaCompute(1.0, 1.0, 1.0)]))
    assert summary == dict.fromkeys(summary)


def test_model_flops_are_the_cost_models() -> None:
    """2 FLOPs per active non-embedding weight per token; 2 · vocab · hidden per sequence."""
    model = ModelSpec.model_validate(read_preset("models", "llama-2-7b"))
    assert model.gemm_flops_per_token == 2 * model.active_parameters_nonembedding
    assert model.gemm_flops_per_seq == 2 * 32000 * 4096
