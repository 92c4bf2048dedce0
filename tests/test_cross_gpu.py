"""One GPU predicts the next (benchmarks/cross_gpu.py): the roofline fitted on Splitwise's A100
steps predicts its H100 steps by the GPU preset alone, with no H100 step in the fit."""

from __future__ import annotations

import pytest

from simkv.calibrate.fit import FitResult
from simkv.calibrate.steps import StepSample
from simkv.config.hardware import load_gpu_preset, load_model_preset
from simkv.engine.cost_model import RooflineCostModel
from tests.conftest import load_benchmark

xgpu = load_benchmark("cross_gpu")
A100, H100 = xgpu.read(xgpu.A100), xgpu.read(xgpu.H100)


@pytest.fixture(scope="module")
def fit() -> FitResult:
    return xgpu.fit_a100(A100)  # one least-squares fit, a few seconds


def test_the_fit_sees_a100_steps_only() -> None:
    assert {s.gpu for s in A100} == {"a100-80gb"} and {s.gpu for s in H100} == {"h100-80gb"}
    assert len(A100) == len(H100) == 94  # the same grid; the TP 2 batch-64 outlier dropped
    with pytest.raises(ValueError, match="A100 steps only"):
        xgpu.fit_a100([*A100[:-1], H100[0]])


def test_the_fit_records_the_a100_clock(fit: FitResult) -> None:
    assert fit.config.latency_clock_mhz == 1410.0
    assert xgpu.unclocked(fit.config).latency_clock_mhz is None


def _model(fit: FitResult, sample: StepSample, gpu: str) -> RooflineCostModel:
    return RooflineCostModel(fit.config, load_model_preset(sample.model), load_gpu_preset(gpu),
                             tensor_parallel=sample.tensor_parallel, block_size=16)  # fmt: skip


def test_the_swap_changes_no_host_term_and_every_gpu_term(fit: FitResult) -> None:
    for sample in H100:
        on_a100, on_h100 = _model(fit, sample, "a100-80gb"), _model(fit, sample, "h100-80gb")
        assert on_a100.host_s(sample.work) == on_h100.host_s(sample.work) > 0
        gpu_a100 = on_a100.step_time_s(sample.work) - on_a100.host_s(sample.work)
        gpu_h100 = on_h100.step_time_s(sample.work) - on_h100.host_s(sample.work)
        assert gpu_h100 < 0.75 * gpu_a100  # faster memory, matmuls, links and clock


def test_the_prediction_meets_the_target_on_decode_and_the_clock_rule_helps_both(
    fit: FitResult,
) -> None:
    """Decode under the 12 % target; prefill misses it (15.9 %: docs/fidelity.md says why),
    so it is held to its documented level; the clock rule improves both phases."""
    before = xgpu.phase_errors(xgpu.unclocked(fit.config), H100)
    after = xgpu.phase_errors(fit.config, H100)
    assert after["decode"] < xgpu.TARGET < before["decode"]
    assert after["prefill"] < 0.165
    assert after["prefill"] < before["prefill"] - 0.02
    assert after["decode"] < before["decode"] / 3
