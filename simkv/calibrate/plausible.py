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
    "weight_read_efficiency": (0.8, 0.93, "of the HBM spec"),
    "kv_read_efficiency": (KNOBS["kv_read_efficiency"][0], 0.93, "of the HBM spec"),
    "gemm_efficiency": (0.4, 0.8, "of the tensor peak"),
    "attention_efficiency": (0.4, 0.8, "of the tensor peak"),
}
"""Knob → (low, high, of what) of its physical range, as shares of the GPU's spec-sheet figure.
Sources, as :data:`simkv.calibrate.fit.PRIOR_SIGMA` sizes its prior: streaming kernels reach
80-93 % of the HBM bandwidth spec (so no read beats 0.93; KV reads have no known floor, so
theirs is the fit's bound); GEMMs and FlashAttention kernels reach 40-80 % of the tensor peak
(above it, the sheet may quote a slower accumulate rate: check the spec before trusting it)."""


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
