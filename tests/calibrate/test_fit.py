"""The fit recovers known knobs from synthetic measurements, and reads the shipped tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from simkv.calibrate.fit import fit_steps, step_errors
from simkv.calibrate.steps import StepSample, decode_work, prefill_work, read_step_samples
from simkv.config.cost import RooflineCostConfig
from simkv.config.hardware import load_gpu_preset, load_model_preset
from simkv.engine.cost_model import RooflineCostModel, StepWork, chunk_attention_pairs
from simkv.errors import InputError

MEASURED = Path(__file__).parents[2] / "traces" / "measured"
TRUE = RooflineCostConfig(
    step_overhead_ms=7.5, seq_overhead_ms=0.04, gemm_efficiency=0.55,
    weight_read_efficiency=0.7, kv_read_efficiency=0.6, attention_efficiency=0.3,
)  # fmt: skip
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
    works = [(prefill_work(b, n), "prefill") for b in (1, 2, 4) for n in (128, 512, 2048, 4096)]
    works += [(decode_work(b, c), "decode") for b in (1, 8, 32, 128, 256) for c in (64, 1024, 4096)]
    works += [(_mixed(d, 800, n), "mixed") for d in (16, 64) for n in (256, 1024)]
    return [StepSample(w, "llama-3.1-8b", "a100-80gb", 1, model.step_time_s(w) * 1e3, phase)
            for w, phase in works]  # fmt: skip


def test_fit_recovers_known_knobs_within_one_percent() -> None:
    result = fit_steps(RooflineCostConfig(), synthetic_samples(), KNOBS)
    for knob in KNOBS:
        assert getattr(result.config, knob) == pytest.approx(getattr(TRUE, knob), rel=0.01), knob
    assert result.error < 1e-4
    assert result.start_error > 0.1
    assert result.at_bounds == ()


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
    ],
)
def test_bad_generic_step_tables(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "steps.csv"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        read_step_samples(path, model="llama-3.1-8b", gpu="a100-80gb")
    assert str(err.value).startswith(str(path)) and message in str(err.value)


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
