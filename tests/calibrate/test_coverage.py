"""What a step fit saw (simkv.calibrate.coverage): the data range line, hand-checked, and the
extrapolation line's rules, each on a step set that trips it and one that does not."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from simkv.calibrate.coverage import (
    MIN_BATCH_SEEN,
    MIN_KV_SHARE,
    covered,
    data_range,
    extrapolation,
    kv_shares,
    prefills_per_step,
)
from simkv.calibrate.steps import StepSample, decode_work, prefill_work
from simkv.calibrate.trust import Trust
from simkv.config.cost import RooflineCostConfig
from simkv.engine.step_work import StepWork

CFG = RooflineCostConfig(seq_overhead_ms=0.02)


def sample(work: StepWork, phase: str) -> StepSample:
    """A step of Llama-3.1-8B on an A100 (its time does not enter the coverage)."""
    return StepSample(work, "llama-3.1-8b", "a100-80gb", 1, 10.0, phase)


def mixed(decodes: int, prefill_tokens: int, kv_read_tokens: int) -> StepWork:
    """A step of ``decodes`` decoding sequences and one prefilling from scratch."""
    return StepWork(prefill_tokens=prefill_tokens, decode_tokens=decodes, attention_pairs=0,
                    kv_read_tokens=kv_read_tokens, num_seqs=decodes + 1)  # fmt: skip


def batches(sizes: Sequence[int], context: int = 2048) -> list[StepSample]:
    """Decode steps of each batch size at ``context`` tokens a sequence, and a prefill step of
    two prompts (so only the batch rule can trip)."""
    steps = [sample(decode_work(b, context), "decode") for b in sizes]
    return [*steps, sample(prefill_work(2, 256), "prefill")]


def test_the_data_range_spans_each_phase_on_the_pattern_axes() -> None:
    steps = [
        sample(decode_work(1, 99), "decode"),  # 100 tokens of KV read: context 100
        sample(decode_work(9, 1929), "decode"),  # 9 × 1,930 read: context 1,930
        sample(decode_work(4, 499), "decode"),
        sample(mixed(3, 100, 800), "mixed"),  # 4 sequences, 103 tokens, 800 / 4 = 200 a seq
        sample(prefill_work(1, 16), "prefill"),
        sample(prefill_work(4, 256), "prefill"),  # 4 prompts, 1,024 tokens, no KV read
    ]
    assert data_range(steps) == (
        "data range: decode 3 steps, batch 1–9 sequences, context 100–1,930 tokens/seq; "
        "mixed 1 step, batch 4 sequences, 103 tokens a step, context 200 tokens/seq; "
        "prefill 2 steps, batch 1–4 sequences, 16–1,024 tokens a step"
    )
    assert prefills_per_step(steps).tolist() == [0, 0, 0, 1, 1, 4]


def test_batches_of_at_most_nine_extrapolate_the_per_sequence_overhead() -> None:
    line = extrapolation(CFG, batches(range(1, 10)), ("step_overhead_ms", "seq_overhead_ms"))
    assert line == (
        "extrapolation: the largest batch seen is 9 sequences, so seq_overhead_ms (0.02 ms) is "
        "extrapolated to larger batches — calibrate on a run whose batches reach the engine's "
        "max_num_seqs"
    )


def test_batches_up_to_32_see_it() -> None:
    knobs = ("step_overhead_ms", "seq_overhead_ms", "prefill_overhead_ms", "kv_read_efficiency")
    assert extrapolation(CFG, batches((1, 2, 4, 8, 16, 32)), knobs) is None
    assert extrapolation(CFG, batches([MIN_BATCH_SEEN]), knobs) is None  # the rule's edge
    assert "batch seen is 15" in str(extrapolation(CFG, batches([MIN_BATCH_SEEN - 1]), knobs))
    # a knob not fitted is not reported, however small the batches
    assert extrapolation(CFG, batches([1, 2]), ("step_overhead_ms",)) is None


def test_one_prefill_a_step_extrapolates_the_per_prefill_overhead() -> None:
    one = [sample(mixed(31, 64, 31 * 2048), "mixed"), sample(prefill_work(1, 512), "prefill")]
    line = extrapolation(CFG, one, ("prefill_overhead_ms",))
    assert line == (
        "extrapolation: no step prefills 2 sequences, so prefill_overhead_ms (0 ms) is "
        "extrapolated to steps that do"
    )
    two = [*one, sample(prefill_work(2, 512), "prefill")]
    assert extrapolation(CFG, two, ("prefill_overhead_ms",)) is None


def test_a_kv_read_too_small_to_see_extrapolates_its_efficiency() -> None:
    """Llama-3.1-8B streams 16 GB of weights a step; 8 sequences of 64 tokens read 64 MB of KV
    (0.4 %), 256 of 4,096 tokens 137 GB (most of the step)."""
    short = [sample(decode_work(8, 63), "decode")]
    assert kv_shares(CFG, short)[0] == pytest.approx(0.004, abs=0.002)
    line = extrapolation(CFG, short, ("kv_read_efficiency",))
    assert line is not None and line.startswith("extrapolation: the KV read is at most 0.")
    assert "(contexts 64 tokens/seq), so kv_read_efficiency (0.86) is extrapolated" in line
    long = [*short, sample(decode_work(256, 4095), "decode")]
    assert kv_shares(CFG, long)[1] > 0.5
    assert extrapolation(CFG, long, ("kv_read_efficiency",)) is None
    # the efficiency's physical range (0.5-0.93) moves a 5.8 % share by 5 %, the least trend
    assert pytest.approx(0.05) == MIN_KV_SHARE * (0.93 / 0.5 - 1)


def test_trust_carries_both_lines_in_print_order() -> None:
    trust = covered(Trust("held out: x", "residuals: y", "verdict: z"), CFG, batches([1, 9]),
                    ("seq_overhead_ms",))  # fmt: skip
    assert trust.data_range is not None and trust.extrapolation is not None
    assert trust.lines() == ["held out: x", trust.data_range, "residuals: y",
                             trust.extrapolation, "verdict: z"]  # fmt: skip
    assert Trust("held out: x", None, "verdict: z").lines() == ["held out: x", "verdict: z"]
