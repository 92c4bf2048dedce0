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
