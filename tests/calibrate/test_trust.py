"""How far to trust a fit (simkv.calibrate.trust): on synthetic steps priced by the model
itself a fit is transferable with a held-out error near zero; with a term the fitted knobs
cannot describe (a cost quadratic in the batch size), a knob leaves its physical range, the
verdict names the effect most likely behind it, the residual pattern names the axis, and the
held-out error grows."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from simkv.calibrate.fit import fit_steps
from simkv.calibrate.plausible import SUSPECTS, suspect
from simkv.calibrate.steps import StepSample, decode_work, prefill_work
from simkv.calibrate.trust import holdout, holdout_parts, residual_pattern, step_trust, verdict
from simkv.config.cost import RooflineCostConfig
from simkv.config.hardware import load_gpu_preset, load_model_preset
from simkv.engine.cost_model import RooflineCostModel
from simkv.engine.step_work import StepWork

TRUE = RooflineCostConfig(step_overhead_ms=2.0, seq_overhead_ms=0.02, gemm_efficiency=0.8,
                          kv_read_efficiency=0.8, attention_efficiency=0.5)  # fmt: skip
"""Every efficiency inside its physical range (simkv.calibrate.plausible.PHYSICAL)."""
KNOBS = ("step_overhead_ms", "seq_overhead_ms", "gemm_efficiency", "kv_read_efficiency",
         "attention_efficiency")  # fmt: skip


def steps(extra_ms: Callable[[StepWork], float], tp: Sequence[int] = (1,)) -> list[StepSample]:
    """Prefill and decode steps priced by the roofline at TRUE, plus ``extra_ms``."""
    out = []
    for degree in tp:
        model = RooflineCostModel(TRUE, load_model_preset("llama-3.1-8b"),
                                  load_gpu_preset("a100-80gb"), tensor_parallel=degree,
                                  block_size=16)  # fmt: skip
        works = [(prefill_work(b, n), "prefill") for b in (1, 2, 4) for n in (128, 512, 2048)]
        works += [(decode_work(b, c), "decode") for b in (1, 8, 32, 128, 256)
                  for c in (64, 1024, 4096)]  # fmt: skip
        out += [StepSample(w, "llama-3.1-8b", "a100-80gb", degree,
                           model.step_time_s(w) * 1e3 + extra_ms(w), phase)
                for w, phase in works]  # fmt: skip
    return out


def refit(
    start: RooflineCostConfig, samples: Sequence[StepSample], knobs: Sequence[str]
) -> RooflineCostConfig:
    return fit_steps(start, samples, knobs).config


def quadratic(work: StepWork) -> float:
    """A scheduling cost growing with the square of the batch (no knob describes it)."""
    return 0.0008 * work.num_seqs**2


def test_a_fit_of_the_model_to_itself_is_transferable() -> None:
    samples = steps(lambda w: 0.0)
    fitted = fit_steps(RooflineCostConfig(), samples, KNOBS).config
    trust = step_trust(RooflineCostConfig(), fitted, samples, KNOBS, refit)
    assert trust.verdict == "verdict: transferable (every fitted knob within its range)"
    assert trust.pattern is None
    assert trust.holdout.startswith("held out (alternate halves): 0.")


def test_a_missing_term_names_the_knob_the_effect_and_the_pattern() -> None:
    samples = steps(quadratic)
    knobs = ("step_overhead_ms", "gemm_efficiency", "kv_read_efficiency", "attention_efficiency")
    fitted = fit_steps(RooflineCostConfig(), samples, knobs).config
    assert fitted.kv_read_efficiency == pytest.approx(0.5)  # the low end of 0.5-0.93
    trust = step_trust(RooflineCostConfig(), fitted, samples, knobs, refit)
    assert trust.verdict.startswith(
        "verdict: not transferable: kv_read_efficiency 0.5 at a bound of its range: "
    )
    assert SUSPECTS["kv_read_efficiency"][0] in trust.verdict  # "a per-sequence … cost"
    assert trust.pattern is not None
    assert trust.pattern.startswith("residuals of the decode steps trend with")
    held = float(trust.holdout.split(": ")[1].split("%")[0])
    assert held > 5.0


def test_the_pattern_names_the_batch_when_the_batch_cost_is_left_out() -> None:
    """The true per-sequence cost, held at a tenth of its value: the decode residuals fall with
    the batch size (predicted too fast at large batches)."""
    samples = steps(lambda w: 0.0)
    start = TRUE.model_copy(update={"seq_overhead_ms": 0.002})
    pattern = residual_pattern(start, samples)
    assert pattern is not None
    assert pattern.startswith("residuals of the decode steps trend with batch size (Spearman ρ -")
    assert "predicted / measured falls" in pattern and "missing or under-priced" in pattern
    assert residual_pattern(TRUE, samples) is None  # the true knobs leave no trend


def test_several_groups_are_held_out_one_at_a_time() -> None:
    samples = steps(lambda w: 0.0, tp=(1, 2))
    how, parts = holdout_parts(samples)
    assert how == "leave one group out"
    assert list(parts) == ["llama-3.1-8b a100-80gb TP1", "llama-3.1-8b a100-80gb TP2"]
    fits: list[int] = []
    result = holdout(RooflineCostConfig(), samples, ("step_overhead_ms",), refit,
                     lambda: fits.append(1))  # fmt: skip
    assert result is not None and len(fits) == 2
    assert result.worst[0] in parts
    one_group = holdout_parts(steps(lambda w: 0.0))
    assert one_group[0] == "alternate halves" and list(one_group[1]) == ["even steps", "odd steps"]
    assert holdout(RooflineCostConfig(), samples[:3], ("step_overhead_ms",), refit) is None


@pytest.mark.parametrize(
    ("knob", "value", "side", "state"),
    [("attention_efficiency", 0.13, 0, "outside"),
     ("attention_efficiency", 1.0, 1, "at a bound of"),
     ("step_overhead_ms", 500.0, 1, "at a bound of"),
     ("kv_read_efficiency", 0.5, 0, "at a bound of"),
     ("kv_read_efficiency", 1.0, 1, "outside")],
)  # fmt: skip
def test_a_knob_out_of_range_is_blamed_on_its_side(
    knob: str, value: float, side: int, state: str
) -> None:
    assert suspect(knob, value) == SUSPECTS[knob][side]
    line = verdict(TRUE.model_copy(update={knob: value}), (knob, "gemm_efficiency"))
    assert line == f"verdict: not transferable: {knob} {value:.4g} {state} its range: " + \
        SUSPECTS[knob][side]  # fmt: skip
