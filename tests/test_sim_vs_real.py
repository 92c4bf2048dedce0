"""The step-level reference of benchmarks/sim_vs_real.py: the free linear model's exact
least-mean-abs.-error fit (a linear program), on steps whose true costs are known."""

from __future__ import annotations

import numpy as np
import pytest

from simkv.calibrate.steps import StepSample, decode_work, prefill_work
from tests.conftest import load_benchmark

svr = load_benchmark("sim_vs_real")


def _prefill(batch: int, prompt: int, ms: float) -> StepSample:
    return StepSample(prefill_work(batch, prompt), "llama-2-7b", "a100-80gb", 1, ms, "prefill")


def _decode(batch: int, context: int, ms: float) -> StepSample:
    return StepSample(decode_work(batch, context), "llama-2-7b", "a100-80gb", 1, ms, "decode")


PREFILLS = [(b, n) for b in (1, 2, 4) for n in (128, 512, 2048)]


def _true_prefill_ms(batch: int, prompt: int) -> float:
    """20 ms + 0.1 ms a token + 2 ms a prompt + 1e-6 ms an attention pair (all in the model)."""
    work = prefill_work(batch, prompt)
    return 20 + 0.1 * work.prefill_tokens + 2 * batch + 1e-6 * work.attention_pairs


def test_free_linear_fit_is_exact_on_steps_it_can_express() -> None:
    steps = [_prefill(b, n, _true_prefill_ms(b, n)) for b, n in PREFILLS]
    steps += [_decode(b, c, 30 + 0.5 * b + 1e-4 * b * (c + 1)) for b in (1, 8, 64) for c in
              (256, 2048)]  # fmt: skip
    prefill, k_prefill = svr._least_abs_linear([s for s in steps if s.phase == "prefill"])
    decode, k_decode = svr._least_abs_linear([s for s in steps if s.phase == "decode"])
    assert (k_prefill, k_decode) == (5, 4)
    assert np.max(prefill) < 1e-9 and np.max(decode) < 1e-9


def test_free_linear_fit_is_least_abs_error_so_one_bad_step_stays_its_own() -> None:
    """Least abs. error, not least squares: eight exact steps stay exact and the one measured
    40 % slow carries its whole 40 % / 1.4 error (least squares would spread it)."""
    steps = [_prefill(b, n, _true_prefill_ms(b, n)) for b, n in PREFILLS]
    slow = PREFILLS.index((2, 512))
    steps[slow] = _prefill(2, 512, 1.4 * _true_prefill_ms(2, 512))
    errors, _ = svr._least_abs_linear(steps)
    assert errors[slow] == pytest.approx(0.4 / 1.4, rel=1e-6)
    assert np.max(np.delete(errors, slow)) < 1e-9
