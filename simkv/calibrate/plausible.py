"""Whether a fitted knob is physically plausible: its value against the range real kernels
reach, one line per fitted knob after ``simkv calibrate``.

Only the efficiencies have a physical range (:data:`PHYSICAL`); the host overheads and
latencies differ by engine generation and machine, so they are judged against the fit's bounds
(:data:`simkv.calibrate.fit.KNOBS`) alone: a knob at a bound means the data pushed it out of
the model's range.
"""

from __future__ import annotations

from simkv.calibrate.fit import KNOBS

PHYSICAL: dict[str, tuple[float, float, str]] = {
    "weight_read_efficiency": (0.8, 0.93, "of the memory bandwidth spec"),
    "kv_read_efficiency": (0.5, 0.93, "of the memory bandwidth spec"),
    "gemm_efficiency": (0.6, 1.0, "of the sustained matmul rate"),
    "attention_efficiency": (0.3, 1.0, "of the sustained matmul rate"),
}
"""Knob → (low, high, of what) of its physical range, as shares of the device figure the cost
model prices it against (:class:`simkv.config.hardware.GpuSpec`: the tensor rate is the
board's measured sustained matmul rate where its preset has one). Streaming kernels reach
80-93 % of a memory bandwidth spec, so no read beats 0.93; the kernel-level fits of vLLM
0.19's own kernels (docs/cost-model.md: the linear layers at 0.98 of the sustained rate, the
attention layer's KV reads at 0.86 and its prefill attention at 0.52) sit inside these ranges,
each with room for other kernels of the same kind; a matmul cannot beat the rate a large
matmul sustains (1.0)."""


def plausibility(knob: str, value: float) -> tuple[bool, str]:
    """``(plausible, line)`` for fitted ``knob`` = ``value`` (a line of at most 72 columns)."""
    if knob in PHYSICAL:
        low, high, of = PHYSICAL[knob]
        inside = low <= value <= high
        where = "within" if inside else "outside"
        return inside, f"{knob} {value:.4g}: {where} {low:g}-{high:g} {of}"
    low, high = KNOBS[knob]
    at_bound = value <= low * 1.01 or value >= high * 0.99
    state = "at a bound of" if at_bound else "inside"
    return not at_bound, f"{knob} {value:.4g}: {state} the fit range {low:g}-{high:g}"


SUSPECTS: dict[str, tuple[str, str]] = {
    "gemm_efficiency": (
        "the linear layers run slower than their FLOPs: launch or weight-streaming costs of "
        "small batches, or a host cost growing with the tokens, not modelled",
        "the linear layers beat the sustained matmul rate: the GPU's tensor rate is "
        "understated, or prefill time is absorbed by another knob",
    ),
    "weight_read_efficiency": (
        "streaming the weights looks slow: a fixed per-step cost (launches, host) not in the "
        "step overhead",
        "streaming the weights beats the bandwidth: a fixed cost that does not shrink with "
        "the tensor-parallel degree is priced as weight reads",
    ),
    "kv_read_efficiency": (
        "attention reads the KV slower than its bytes: a per-sequence or per-block cost "
        "(small blocks, a kernel per sequence) not modelled",
        "decode steps cost less than their KV bytes: the device's attention is not a GPU "
        "kernel reading HBM (CPU caches), or the step overhead over-prices small batches",
    ),
    "attention_efficiency": (
        "prefill attention is slower than FlashAttention-class kernels: a non-flash prefill "
        "kernel or a quadratic memory term not modelled",
        "prefill attention costs less than its FLOPs: a kernel the roofline's FLOP count "
        "over-prices (CPU kernels), or prefill time absorbed by the GEMMs",
    ),
    "step_overhead_ms": (
        "no fixed cost per step is visible: the GPU terms over-price small steps",
        "the fixed cost per step is beyond the range: an engine of another era (vLLM 2023-24 "
        "spent 8-20 ms a step on the host) or a stall not in the model",
    ),
    "seq_overhead_ms": (
        "no cost per sequence is visible: the KV reads already grow with the batch",
        "the cost per sequence is beyond the range: sampling or output processing per token "
        "not modelled",
    ),
}
"""Knob → (sentence when it falls below its range, sentence when above): the unmodelled effect
most likely behind a fitted knob out of range (an efficiency outside :data:`PHYSICAL`, another
knob at a bound of its fit range). A knob not listed gets :func:`suspect`'s generic one."""


def suspect(knob: str, value: float) -> str:
    """The effect most likely behind ``knob`` = ``value`` being out of its range."""
    low, _ = PHYSICAL[knob][:2] if knob in PHYSICAL else KNOBS[knob]
    below = value <= low * 1.01 if knob not in PHYSICAL else value < low
    if knob in SUSPECTS:
        return SUSPECTS[knob][0 if below else 1]
    side = "low" if below else "high"
    return f"pushed to its {side} end: the data hold a term this knob does not describe"
