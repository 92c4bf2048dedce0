"""Whether a fitted knob is physically plausible: its value against the range real kernels
reach, one line per fitted knob after ``simkv calibrate``.

The efficiencies have a physical range (:data:`simkv.calibrate.fit.PHYSICAL`), which a fit
cannot leave (it is their fit range); the host overheads and latencies differ by engine
generation and machine, so they are judged against the fit's bounds
(:data:`simkv.calibrate.fit.KNOBS`) alone. Either way a knob that ends on a bound is suspect:
the data pushed it to the end of what the model allows, so the model lacks a term the data
has (:data:`SUSPECTS` names the likeliest).
"""

from __future__ import annotations

from simkv.calibrate.fit import KNOBS, PHYSICAL

AT_BOUND = 0.01
"""A knob within this share of a bound of its range sits on it."""


def _range(knob: str) -> tuple[float, float, str]:
    """(low, high, what the range is) of ``knob``."""
    if knob in PHYSICAL:
        low, high, of = PHYSICAL[knob]
        return low, high, f"{low:g}-{high:g} {of}"
    low, high = KNOBS[knob]
    return low, high, f"the fit range {low:g}-{high:g}"


def knob_state(knob: str, value: float) -> str:
    """``within`` its range, ``at`` a bound (:data:`AT_BOUND`), or ``outside`` it."""
    low, high, _ = _range(knob)
    if value < low or value > high:
        return "outside"
    if value <= low * (1 + AT_BOUND) or value >= high * (1 - AT_BOUND):
        return "at"
    return "within"


def plausibility(knob: str, value: float) -> tuple[bool, str]:
    """``(plausible, line)`` for fitted ``knob`` = ``value``: inside its range and off its
    bounds (a line of at most 72 columns)."""
    state = knob_state(knob, value)
    said = {"within": "within", "at": "at a bound of", "outside": "outside"}[state]
    return state == "within", f"{knob} {value:.4g}: {said} {_range(knob)[2]}"


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
"""Knob → (sentence at or below the low end of its range, sentence at or above the high end):
the unmodelled effect most likely behind a fitted knob there. A knob not listed gets
:func:`suspect`'s generic one."""


def suspect(knob: str, value: float) -> str:
    """The effect most likely behind ``knob`` = ``value`` being at or past an end of its
    range."""
    low, high, _ = _range(knob)
    below = abs(value - low) <= abs(value - high) if low <= value <= high else value < low
    if knob in SUSPECTS:
        return SUSPECTS[knob][0 if below else 1]
    side = "low" if below else "high"
    return f"pushed to its {side} end: the data hold a term this knob does not describe"
