"""The fit recovers known knobs from synthetic measurements, and reads the shipped tables."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from simkv.calibrate.fit import fit_run, fit_steps, step_errors
from simkv.calibrate.steps import (
    StepSample,
    decode_fits,
    decode_work,
    prefill_work,
    read_step_samples,
)
from simkv.config.cost import RooflineCostConfig
from simkv.config.hardware import load_gpu_preset, load_model_preset
from simkv.engine.cost_model import RooflineCostModel
from simkv.engine.step_work import StepWork, chunk_attention_pairs
from simkv.errors import InputError

MEASURED = Path(__file__).parents[2] / "traces" / "measured"
TRUE = RooflineCostConfig(
    step_overhead_ms=7.5, seq_overhead_ms=0.04, gemm_efficiency=0.7,
    weight_read_efficiency=0.84, kv_read_efficiency=0.6, attention_efficiency=0.4,
)  # fmt: skip
"""Knobs away from the defaults, each efficiency inside its physical range (the fit's bounds)."""
KNOBS = ("step_overhead_ms", "seq_overhead_ms", "gemm_efficiency", "weight_read_efficiency",
         "kv_read_efficiency", "attention_efficiency")  # fmt: skip


def _mixed(decodes: int, context: int, chunk: int) -> StepWork:
    return StepWork(prefill_tokens=chunk, decode_tokens=decodes,
                    attention_pairs=chunk_attention_pairs(chunk, 0),
                    kv_read_tokens=decodes * (context + 1), num_seqs=decodes + 1)  # fmt: skip


def synthetic_samples() -> list[StepSample]:
    """Steps priced by the model with TRUE's knobs: prefill, decode and mixed shapes."""
    model = RooflineCostModel(TRUE, load_model_preset("llama-3.1-8b"), load_gpu_preset("a100-80gb"),
                              tensor_parallel=1, block_size=16)  # fmt: skip
    prompts = (128, 512, 2048, 4096, 8192)  # the longest make attention a visible share
    works = [(prefill_work(b, n), "prefill") for b in (1, 2, 4) for n in prompts]
    works += [(decode_work(b, c), "decode") for b in (1, 8, 32, 128, 256) for c in (64, 1024, 4096)]
    works += [(_mixed(d, 800, n), "mixed") for d in (16, 64) for n in (256, 1024)]
    return [StepSample(w, "llama-3.1-8b", "a100-80gb", 1, model.step_time_s(w) * 1e3, phase)
            for w, phase in works]  # fmt: skip


def test_fit_recovers_known_knobs_within_one_percent() -> None:
    """Without the prior the fit is exact; with it (the default) it pulls each knob toward the
    start by less than 1 %."""
    result = fit_steps(RooflineCostConfig(), synthetic_samples(), KNOBS, prior=False)
    for knob in KNOBS:
        assert getattr(result.config, knob) == pytest.approx(getattr(TRUE, knob), rel=0.01), knob
    assert result.error < 1e-4
    assert result.start_error > 0.1
    assert result.at_bounds == ()
    with_prior = fit_steps(RooflineCostConfig(), synthetic_samples(), KNOBS)
    for knob in KNOBS:
        assert getattr(with_prior.config, knob) == pytest.approx(getattr(TRUE, knob), rel=0.01)
    assert with_prior.error < 1e-3


def test_fit_is_deterministic() -> None:
    samples = synthetic_samples()
    first = fit_steps(RooflineCostConfig(), samples, KNOBS[:3])
    second = fit_steps(RooflineCostConfig(), samples, KNOBS[:3])
    assert first.config == second.config


def test_too_few_steps_or_bad_knobs_are_input_errors() -> None:
    samples = synthetic_samples()[:2]
    with pytest.raises(InputError, match="cannot determine"):
        fit_steps(RooflineCostConfig(), samples, KNOBS)
    with pytest.raises(InputError, match="unknown knob 'speed'"):
        fit_steps(RooflineCostConfig(), synthetic_samples(), ["speed"])


def test_distserve_profile_is_sampled_from_its_coefficients() -> None:
    samples = read_step_samples(MEASURED / "distserve" / "profiler-a100-80g.vllm.json",
                                gpu="a100-80gb", model="facebook/opt-13b")  # fmt: skip
    assert {s.tensor_parallel for s in samples} == {1, 2, 4}
    first = samples[0]  # TP 1, one 64-token prompt: 22.052 + 0.14051·64 + 8.0766e-6·64²
    assert first.phase == "prefill" and first.work.prefill_tokens == 64
    assert first.time_ms == pytest.approx(22.052204789 + 0.140509238 * 64 + 8.0765848e-6 * 4096)


def test_splitwise_drops_the_outlier_and_averages_repeats() -> None:
    samples = read_step_samples(MEASURED / "splitwise" / "perf_model_a100.csv", model="llama2-70b")
    tp2_batch64 = [s for s in samples if s.tensor_parallel == 2 and s.work.num_seqs == 64]
    assert tp2_batch64 == []
    assert {s.tensor_parallel for s in samples} == {2, 4, 8}
    assert all(s.model == "llama-2-70b" and s.gpu == "a100-80gb" for s in samples)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "step_time_ms,prefill_tokens,decode_tokens,num_seqs,kv_read_tokens\n0,1,0,1,0\n",
            ":2 step_time_ms: expected a positive number",
        ),
        (
            "step_time_ms,prefill_tokens,decode_tokens,num_seqs,kv_read_tokens\n5,0,0,1,0\n",
            ":2 prefill_tokens: a step computes at least one token",
        ),
        (
            "step_time_ms,prefill_tokens,decode_tokens,num_seqs\n5,1,0,1\n",
            ":1 kv_read_tokens: missing column",
        ),
        (
            "step_time_ms,prefill_tokens,decode_tokens,num_seqs,kv_read_tokens\n5,0,4,2,8\n",
            ":2 num_seqs: num_seqs must be ≥ decode_tokens",
        ),
        (
            "step_time_ms,prefill_tokens,decode_tokens,num_seqs,kv_read_tokens,prefill_kv_tokens\n"
            "5,64,2,3,100,101\n",
            ":2 prefill_kv_tokens: prefill_kv_tokens exceeds kv_read_tokens",
        ),
        (
            "step_time_ms,prefill_tokens,decode_tokens,num_seqs,kv_read_tokens,prefill_kv_tokens\n"
            "5,64,2,3,100,x\n",
            ":2 prefill_kv_tokens:",
        ),
    ],
)
def test_bad_generic_step_tables(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "steps.csv"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_step_samples(path, model="llama-3.1-8b", gpu="a100-80gb")
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_generic_table_reads_the_prefill_share_of_the_kv(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text("step_time_ms,prefill_tokens,decode_tokens,num_seqs,kv_read_tokens,"
                    "prefill_kv_tokens\n5,64,2,3,100,40\n5,64,2,3,100,\n")  # fmt: skip
    first, second = read_step_samples(path, model="llama-3.1-8b", gpu="a100-80gb")
    assert (first.work.prefill_kv_tokens, second.work.prefill_kv_tokens) == (40, 0)
    assert first.phase == "mixed"


def test_generic_table_needs_model_and_gpu(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text(
        "step_time_ms,prefill_tokens,decode_tokens,num_seqs,kv_read_tokens\n5,1,0,1,0\n"
    )
    with pytest.raises(InputError, match="pass --model"):
        read_step_samples(path, gpu="a100-80gb")
    with pytest.raises(InputError, match="no GPU preset matches 'tpu'"):
        read_step_samples(path, model="llama-3.1-8b", gpu="tpu")


def test_step_errors_are_relative() -> None:
    samples = synthetic_samples()
    assert max(abs(e) for e in step_errors(TRUE, samples)) < 1e-12


def test_fit_recovers_prefill_overhead_and_all_reduce_knobs() -> None:
    """The per-prefill overhead (a step-fit knob) and the all-reduce latencies come back within
    1 % from tp 1, 2 and 4 steps priced with known values (with tp 2 and 4 alone the step
    overhead and the all-reduce call latency are one constant: three degrees are needed)."""
    true = TRUE.model_copy(update={"prefill_overhead_ms": 1.5, "allreduce_latency_us": 40.0,
                                   "nvlink_hop_latency_us": 6.0})  # fmt: skip
    model, gpu = load_model_preset("llama-3.1-8b"), load_gpu_preset("a100-80gb")
    works = [prefill_work(b, n) for b in (1, 4, 16) for n in (128, 512, 2048)]
    works += [decode_work(b, c) for b in (1, 8, 32, 128, 256) for c in (64, 1024)]
    samples = []
    for tp in (1, 2, 4):
        cost = RooflineCostModel(true, model, gpu, tensor_parallel=tp, block_size=16)
        phases = ["prefill" if w.prefill_tokens else "decode" for w in works]
        samples += [StepSample(w, "llama-3.1-8b", "a100-80gb", tp, cost.step_time_s(w) * 1e3, p)
                    for w, p in zip(works, phases, strict=True)]  # fmt: skip
    knobs = ("step_overhead_ms", "seq_overhead_ms", "prefill_overhead_ms", "gemm_efficiency",
             "kv_read_efficiency", "allreduce_latency_us", "nvlink_hop_latency_us")  # fmt: skip
    result = fit_steps(TRUE, samples, knobs)
    for knob in knobs:
        assert getattr(result.config, knob) == pytest.approx(getattr(true, knob), rel=0.01), knob


def test_fit_separates_worker_overhead_from_ring_hops_across_model_depths() -> None:
    """Per step, ``(tp − 1) · worker_overhead`` and the ring's ``4 · layers · (tp − 1) · hop``
    both grow with the tp degree; only models of different depths (32 and 80 layers) tell them
    apart. Steps of both at tp 1, 2 and 4 give back each within 1 %."""
    true = TRUE.model_copy(update={"worker_overhead_ms": 2.0, "nvlink_hop_latency_us": 6.0})
    gpu = load_gpu_preset("a100-80gb")
    samples = []
    for name in ("llama-3.1-8b", "llama-2-70b"):
        model = load_model_preset(name)
        works = [prefill_work(b, n) for b in (1, 4) for n in (128, 1024)]
        works += [decode_work(b, c) for b in (1, 16, 64) for c in (64, 1024)]
        for tp in (1, 2, 4):
            cost = RooflineCostModel(true, model, gpu, tensor_parallel=tp, block_size=16)
            for w in works:
                phase = "prefill" if w.prefill_tokens else "decode"
                samples.append(StepSample(w, name, "a100-80gb", tp, cost.step_time_s(w) * 1e3,
                                          phase))  # fmt: skip
    knobs = ("step_overhead_ms", "seq_overhead_ms", "gemm_efficiency", "kv_read_efficiency",
             "worker_overhead_ms", "nvlink_hop_latency_us")  # fmt: skip
    result = fit_steps(TRUE, samples, knobs)
    for knob in knobs:
        assert getattr(result.config, knob) == pytest.approx(getattr(true, knob), rel=0.01), knob


def test_prior_holds_a_knob_the_data_cannot_separate() -> None:
    """Weight-bound decode steps (≤ 32 sequences) of one model on one GPU cost ``overhead +
    weights / weight_read_eff + ...``: the fixed overhead and the weight-read efficiency trade
    one for one. Without a prior the
    split depends on the optimiser's path; with it, the efficiency (narrow prior, 1.25-fold)
    stays near its start and the overhead (4-fold) absorbs the difference."""
    samples = [s for s in synthetic_samples() if s.phase == "decode" and s.work.num_seqs <= 32]
    knobs = ("step_overhead_ms", "weight_read_efficiency", "seq_overhead_ms", "kv_read_efficiency")
    start = TRUE.model_copy(update={"weight_read_efficiency": 0.9})
    held = fit_steps(start, samples, knobs)
    assert held.error < 2e-3  # the data are fitted either way
    moved = math.log(held.config.weight_read_efficiency / 0.9)
    assert abs(moved) < 0.05 < math.log(held.config.step_overhead_ms / 7.5)
    free = fit_steps(start, samples, knobs, prior=False)
    assert abs(math.log(free.config.weight_read_efficiency / 0.9)) > abs(moved)


def test_bandwidth_efficiencies_stop_at_the_spec_sheet() -> None:
    """A step set whose weights would have to stream at 1.5× the HBM spec ends the
    weight-read efficiency at the top of its physical range, 0.93 (reported by
    ``at_bounds``), not above it."""
    fast = TRUE.model_copy(update={"weight_read_efficiency": 1.5, "step_overhead_ms": 0.5})
    model, gpu = load_model_preset("llama-3.1-8b"), load_gpu_preset("a100-80gb")
    cost = RooflineCostModel(fast, model, gpu, tensor_parallel=1, block_size=16)
    samples = [StepSample(decode_work(b, 64), "llama-3.1-8b", "a100-80gb", 1,
                          cost.step_time_s(decode_work(b, 64)) * 1e3, "decode")
               for b in (1, 2, 4)]  # fmt: skip
    result = fit_steps(TRUE, samples, ("weight_read_efficiency",))
    assert result.config.weight_read_efficiency == pytest.approx(0.93)
    assert result.at_bounds == ("weight_read_efficiency",)


def test_distserve_decode_grid_keeps_only_batches_that_fit() -> None:
    """OPT-66B at TP 2 leaves ~9.5 GiB per A100-80GB for KV (0.9 · 80 GiB − 61.2 GiB of
    weights − 1 GiB reserve) at 1.18 MB a token: about 8,900 tokens, so 256 sequences of
    2,048 tokens were never measured and are not sampled; at TP 8 (~200,000 tokens) 64 of
    them fit."""
    path = MEASURED / "distserve" / "profiler-a100-80g.vllm.json"
    samples = read_step_samples(path, gpu="a100-80gb", model="opt-66b")
    tp2 = [s for s in samples if s.tensor_parallel == 2 and s.phase == "decode"]
    assert tp2 and max(s.work.kv_read_tokens for s in tp2) <= 8_914
    assert all(decode_fits("opt-66b", "a100-80gb", 2, s.work.kv_read_tokens) for s in tp2)
    assert not decode_fits("opt-66b", "a100-80gb", 2, 256 * 2049)
    assert decode_fits("opt-66b", "a100-80gb", 8, 64 * 2049)
    assert not decode_fits("opt-66b", "a100-80gb", 8, 128 * 2049)
    assert len([s for s in samples if s.phase == "prefill" and s.tensor_parallel == 2]) == 24


def test_run_fit_moves_a_knob_that_starts_at_one() -> None:
    """A knob starting at 1 (log 0) still moves: the first simplex steps 1.5× per knob."""

    def objective(cfg: RooflineCostConfig) -> float:
        return abs(cfg.step_overhead_ms - 3.0) / 3.0

    start = RooflineCostConfig(step_overhead_ms=1.0)
    result = fit_run(start, objective, ("step_overhead_ms",), max_evaluations=60, prior=False)
    assert result.config.step_overhead_ms == pytest.approx(3.0, rel=0.01)
    assert result.error < 0.01 < result.start_error


def test_run_fit_near_a_bound_steps_inward_and_stops_at_the_bound() -> None:
    """GEMM efficiency starts at 0.98, under its physical bound of 1: the first simplex steps
    down (1.5× up would leave the range), so the fit still finds 0.8; an optimum beyond the
    bound (1.6) ends on the bound, never past it, and never worse than the start."""

    def objective_at(best: float) -> Callable[[RooflineCostConfig], float]:
        return lambda cfg: abs(cfg.gemm_efficiency - best) / best

    start = RooflineCostConfig(gemm_efficiency=0.98)
    tried: list[float] = []

    def recorded(cfg: RooflineCostConfig) -> float:
        tried.append(cfg.gemm_efficiency)
        return objective_at(0.8)(cfg)

    inside = fit_run(start, recorded, ("gemm_efficiency",), max_evaluations=60, prior=False)
    assert tried[:3] == pytest.approx([0.98, 0.98, 0.98 / 1.5])  # the start (twice), 1.5× down
    assert inside.config.gemm_efficiency == pytest.approx(0.8, rel=0.01)
    beyond = fit_run(start, objective_at(1.6), ("gemm_efficiency",), max_evaluations=60,
                     prior=False)  # fmt: skip
    assert beyond.config.gemm_efficiency == pytest.approx(1.0, rel=1e-3)
    assert beyond.at_bounds == ("gemm_efficiency",)
    assert beyond.error <= beyond.start_error


def test_run_fit_prior_splits_what_the_run_cannot() -> None:
    """A run that fixes only ``step + 33 · seq`` (a batch that never changes): the fit meets it
    and, with the prior, stays near the start along the direction the run leaves flat."""

    def objective(cfg: RooflineCostConfig) -> float:
        return abs(cfg.step_overhead_ms + 33 * cfg.seq_overhead_ms - 1.3) / 1.3

    start = RooflineCostConfig(step_overhead_ms=1.0, seq_overhead_ms=0.02)
    knobs = ("step_overhead_ms", "seq_overhead_ms")
    result = fit_run(start, objective, knobs, max_evaluations=200)
    assert result.error < 0.01
    moves = [abs(math.log(getattr(result.config, k) / getattr(start, k))) for k in knobs]
    assert max(moves) < math.log(1.5)


def test_plausibility_against_physical_and_fit_ranges() -> None:
    from simkv.calibrate.plausible import plausibility

    assert plausibility("gemm_efficiency", 0.7) == (
        True, "gemm_efficiency 0.7: within 0.6-1 of the sustained matmul rate")  # fmt: skip
    assert plausibility("gemm_efficiency", 0.5)[0] is False
    defaults = RooflineCostConfig()
    for knob in ("gemm_efficiency", "attention_efficiency", "kv_read_efficiency",
                 "weight_read_efficiency"):  # fmt: skip
        assert plausibility(knob, getattr(defaults, knob))[0], knob  # the kernel-level fits
    assert plausibility("weight_read_efficiency", 0.97)[0] is False  # above streaming's 93 %
    assert plausibility("step_overhead_ms", 4.0)[0] is True
    assert plausibility("step_overhead_ms", 500.0) == (
        False, "step_overhead_ms 500: at a bound of the fit range 0.001-500")  # fmt: skip
