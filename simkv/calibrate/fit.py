"""Fitting the roofline's knobs to measurements, deterministically (scipy).

Knobs are fitted in log space within the bounds of :data:`KNOBS` (an efficiency within its
physical range, :data:`PHYSICAL`; an overhead positive), under a weak prior centred on the
starting config (:data:`PRIOR_SIGMA`: a direction the data leave flat stays at the start;
``prior=False`` drops it). Two kinds of data:

* **step samples** (:mod:`simkv.calibrate.steps`): ``scipy.optimize.least_squares`` (trust
  region reflective, a deterministic method) on the log-ratio of predicted to measured step
  times, so every step weighs by its relative error;
* **a measured run** (:mod:`simkv.measured`): the run is simulated with candidate knobs and the
  objective is the mean absolute relative error over TTFT, TPOT and E2E latency × mean, p50,
  p90, p99 (the validation summary users compare simulators by); Nelder–Mead (derivative
  free: the objective is piecewise constant at the scale of one step) from the starting config
  and a first simplex of :data:`SIMPLEX_STEP`, with a fixed evaluation budget. The simulation
  is deterministic, so is the fit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, minimize

from simkv.calibrate.steps import StepSample
from simkv.config.cost import RooflineCostConfig
from simkv.config.hardware import load_gpu_preset, load_model_preset
from simkv.engine.cost_model import RooflineCostModel
from simkv.errors import InputError

__all__ = ["KNOBS", "PHYSICAL", "FitResult", "fit_log_ratios", "fit_run", "fit_steps",
           "predicted_ms", "step_error", "step_errors", "step_limits", "step_models"]  # fmt: skip

PHYSICAL: dict[str, tuple[float, float, str]] = {
    "weight_read_efficiency": (0.8, 0.93, "of the memory bandwidth spec"),
    "kv_read_efficiency": (0.5, 0.93, "of the memory bandwidth spec"),
    "gemm_efficiency": (0.6, 1.0, "of the sustained matmul rate"),
    "attention_efficiency": (0.3, 1.0, "of the sustained matmul rate"),
}
"""Knob → (low, high, of what) of an efficiency's physical range, as shares of the device
figure the cost model prices it against (:class:`simkv.config.hardware.GpuSpec`: the tensor
rate is the board's measured sustained matmul rate where its preset has one). Streaming kernels
reach 80-93 % of a memory bandwidth spec, so no read beats 0.93; the kernel-level fits of vLLM
0.19's own kernels (docs/cost-model.md: the linear layers at 0.98 of the sustained rate, the
attention layer's KV reads at 0.86 and its prefill attention at 0.52) sit inside these ranges,
each with room for other kernels of the same kind; a matmul cannot beat the rate a large
matmul sustains (1.0). These are the fit's bounds for these knobs (:data:`KNOBS`): a fit
cannot buy its error with an efficiency no kernel reaches, and one that ends on a bound says
so (:mod:`simkv.calibrate.trust`)."""

KNOBS: dict[str, tuple[float, float]] = {
    "step_overhead_ms": (1e-3, 500.0),
    "seq_overhead_ms": (1e-5, 10.0),
    "worker_overhead_ms": (1e-3, 100.0),
    "prefill_overhead_ms": (1e-4, 100.0),
    "output_token_overhead_ms": (1e-5, 10.0),
    "queued_request_overhead_ms": (1e-5, 10.0),
    "gemm_efficiency": PHYSICAL["gemm_efficiency"][:2],
    "linear_overlap_exponent": (1.0, 64.0),
    "weight_read_efficiency": PHYSICAL["weight_read_efficiency"][:2],
    "kv_read_efficiency": PHYSICAL["kv_read_efficiency"][:2],
    "attention_efficiency": PHYSICAL["attention_efficiency"][:2],
    "attention_floor_us": (0.01, 1000.0),
    "mixed_gqa_reread": (0.001, 1.0),
    "allreduce_latency_us": (0.1, 5000.0),
    "nvlink_hop_latency_us": (0.01, 1000.0),
    "pcie_hop_latency_us": (0.1, 5000.0),
    "interconnect_efficiency": (0.02, 4.0),
}
"""Every fittable knob of :class:`RooflineCostConfig` and its bounds (the fit stays inside):
the efficiencies' physical ranges (:data:`PHYSICAL`), the overheads' and latencies' plain
limits (they differ by engine generation and machine; a step fit also keeps the fixed step
overhead below the data's smallest step: :func:`step_limits`). The interconnect efficiency
may exceed 1 (a ring's bus bandwidth counts both directions of a link)."""

WIDE_PRIOR = math.log(4.0)
PRIOR_SIGMA: dict[str, float] = {
    "weight_read_efficiency": math.log(1.25),
    "kv_read_efficiency": math.log(2.0),
    "gemm_efficiency": math.log(2.0),
    "attention_efficiency": math.log(2.0),
    "interconnect_efficiency": math.log(2.0),
}
"""Width, in log space, of the weak prior every fit puts on each knob, centred on the start
config; :data:`WIDE_PRIOR` (4-fold) for the knobs not listed (host overheads and latencies,
which differ by engine generation, and the linear overlap exponent). The efficiencies are
narrower because their range is known: streaming kernels reach 80-93 % of the HBM spec (hence
1.25-fold around the weight read's 0.9), GEMMs and FlashAttention 40-80 % of the tensor peak.
A knob moving by its width costs as much as one more step (or, in a run fit, the whole run)
misfit by
``PRIOR_DATA_SCALE``. Knobs the data determine barely feel it; knobs the data cannot tell
apart (e.g. the weight-read efficiency against the all-reduce's growth with tp when only two
tp degrees are measured, or the per-sequence overhead of a run that never batches more than
~35 sequences) stay near the start instead of wandering to a bound."""
PRIOR_DATA_SCALE = 0.005
"""The misfit a knob's move by its prior width is worth: the prior residual of a knob is
``PRIOR_DATA_SCALE · Δlog / sigma`` beside the data's log-ratio residuals. 0.5 %: small
enough that noise-free synthetic data still give back their true knobs within 1 %
(tests/calibrate/test_fit.py), large enough to pin a direction the data leave flat. (At 2 %
the smooth linear term, which lets the weight stream and the fixed overhead trade against each
other over every prefill size, pulls a 15-fold displaced step overhead 7 % toward its start.)"""

_START_IF_ZERO = {
    "attention_floor_us": 1.0,
    "mixed_gqa_reread": 0.1,
    "worker_overhead_ms": 1.0,
    "seq_overhead_ms": 0.01,
    "prefill_overhead_ms": 0.1,
    "output_token_overhead_ms": 0.01,
    "queued_request_overhead_ms": 0.01,
    "nvlink_hop_latency_us": 1.0,
    "pcie_hop_latency_us": 10.0,
}


@dataclass(frozen=True)
class FitResult:
    """A fitted config, what was fitted, and how well it fits (mean abs. relative error)."""

    start: RooflineCostConfig
    config: RooflineCostConfig
    knobs: tuple[str, ...]
    error: float
    start_error: float
    evaluations: int
    limits: tuple[tuple[str, float, float], ...] = ()  # bounds narrower than KNOBS'

    def bounds(self, knob: str) -> tuple[float, float]:
        """The bounds ``knob`` was fitted within: :data:`KNOBS`', or the fit's own."""
        own = {name: (low, high) for name, low, high in self.limits}
        return own.get(knob, KNOBS[knob])

    @property
    def at_bounds(self) -> tuple[str, ...]:
        """Knobs that ended within 1 % of a bound they were fitted within (the data pushed
        them to the end of the physical range: a sign the model lacks a term the data has)."""
        out = []
        for knob in self.knobs:
            low, high = self.bounds(knob)
            value = getattr(self.config, knob)
            if value <= low * 1.01 or value >= high * 0.99:
                out.append(knob)
        return tuple(out)


def check_knobs(knobs: Sequence[str]) -> tuple[str, ...]:
    """``knobs`` as a tuple; :class:`InputError` for an unknown or repeated name."""
    for name in knobs:
        if name not in KNOBS:
            known = ", ".join(KNOBS)
            raise InputError(f"unknown knob {name!r}; fittable: {known}", field="--fit")
    if len(set(knobs)) != len(knobs) or not knobs:
        raise InputError("name each knob once, at least one", field="--fit")
    return tuple(knobs)


def _start(
    cfg: RooflineCostConfig, knobs: Sequence[str], within: dict[str, tuple[float, float]] = KNOBS
) -> np.ndarray:
    """The start's knobs in log space, each moved inside its bounds."""
    values = []
    for name in knobs:
        low, high = within[name]
        value = getattr(cfg, name) or _START_IF_ZERO.get(name, low)
        values.append(math.log(min(max(value, low), high)))
    return np.array(values)


def _with(cfg: RooflineCostConfig, knobs: Sequence[str], x: np.ndarray) -> RooflineCostConfig:
    update = {name: float(math.exp(v)) for name, v in zip(knobs, x, strict=True)}
    return cfg.model_copy(update=update)


def step_models(cfg: RooflineCostConfig, samples: Sequence[StepSample]) -> list[RooflineCostModel]:
    """Each sample's roofline priced at ``cfg`` (one model per (model, GPU, tp), shared)."""
    models: dict[tuple[str, str, int], RooflineCostModel] = {}
    out = []
    for s in samples:
        key = (s.model, s.gpu, s.tensor_parallel)
        if key not in models:
            model, gpu = load_model_preset(s.model), load_gpu_preset(s.gpu)
            tp = s.tensor_parallel
            models[key] = RooflineCostModel(cfg, model, gpu, tensor_parallel=tp, block_size=16)
        out.append(models[key])
    return out


def predicted_ms(cfg: RooflineCostConfig, samples: Sequence[StepSample]) -> np.ndarray:
    """Each sample's step time (ms) as ``cfg``'s roofline prices its work."""
    models = step_models(cfg, samples)
    return np.array([m.step_time_s(s.work) * 1e3 for m, s in zip(models, samples, strict=True)])


def step_errors(cfg: RooflineCostConfig, samples: Sequence[StepSample]) -> np.ndarray:
    """Relative error of each sample's predicted step time: ``predicted / measured − 1``."""
    measured = np.array([s.time_ms for s in samples])
    return predicted_ms(cfg, samples) / measured - 1.0


def step_error(cfg: RooflineCostConfig, samples: Sequence[StepSample]) -> float:
    """The mean absolute relative step-time error of ``cfg`` on ``samples`` (what a step fit
    reports)."""
    return float(np.mean(np.abs(step_errors(cfg, samples))))


def _prior_weights(knobs: Sequence[str], prior: bool) -> np.ndarray:
    """Per-knob weight of the prior residual on the log-space displacement (0: no prior)."""
    sigmas = np.array([PRIOR_SIGMA.get(knob, WIDE_PRIOR) for knob in knobs])
    return (PRIOR_DATA_SCALE / sigmas) * (1.0 if prior else 0.0)


def fit_log_ratios(
    start: RooflineCostConfig,
    knobs: Sequence[str],
    predict: Callable[[RooflineCostConfig], np.ndarray],
    measured: np.ndarray,
    *,
    prior: bool,
    limits: dict[str, tuple[float, float]] | None = None,
) -> tuple[RooflineCostConfig, int]:
    """``start`` with ``knobs`` set by least squares on ``log(predict(cfg) / measured)`` (each
    knob in log space within :data:`KNOBS`' bounds, or ``limits``' where given; trust region
    reflective, deterministic),
    plus the weak log-space prior centred on ``start`` if ``prior``; and the number of
    evaluations. The solver of every least-squares fit: step samples here, kernel profiles in
    :mod:`simkv.calibrate.kernels`."""
    log_measured = np.log(measured)
    count = 0
    within = {**KNOBS, **(limits or {})}
    x0 = _start(start, knobs, within)
    weight = _prior_weights(knobs, prior)

    def residuals(x: np.ndarray) -> np.ndarray:
        nonlocal count
        count += 1
        data = np.log(predict(_with(start, knobs, x))) - log_measured
        return np.concatenate([data, weight * (x - x0)])

    bounds = np.log([within[k] for k in knobs]).T
    result = least_squares(
        residuals,
        x0,
        bounds=(bounds[0], bounds[1]),
        method="trf",
        x_scale=1.0,
        xtol=1e-12,
        ftol=1e-12,
        gtol=1e-12,
        max_nfev=400,
    )
    return _with(start, knobs, result.x), count


def fit_steps(
    start: RooflineCostConfig,
    samples: Sequence[StepSample],
    knobs: Sequence[str],
    *,
    prior: bool = True,
) -> FitResult:
    """The knobs that best predict ``samples`` (least squares on log step-time ratios, plus
    the weak log-space prior centred on ``start`` unless ``prior`` is False)."""
    knobs = check_knobs(knobs)
    if len(samples) < len(knobs):
        raise InputError(f"{len(samples)} steps cannot determine {len(knobs)} knobs", field="--fit")
    measured = np.array([s.time_ms for s in samples])
    limits = step_limits(samples)
    fitted, count = fit_log_ratios(
        start, knobs, lambda cfg: predicted_ms(cfg, samples), measured, prior=prior, limits=limits
    )
    return FitResult(
        start=start,
        config=fitted,
        knobs=knobs,
        error=step_error(fitted, samples),
        start_error=step_error(start, samples),
        evaluations=count,
        limits=tuple((knob, *bounds) for knob, bounds in limits.items()),
    )


def step_limits(samples: Sequence[StepSample]) -> dict[str, tuple[float, float]]:
    """Bounds a step fit adds to :data:`KNOBS`: the fixed step overhead below the smallest
    measured step (every step pays it, so none can be shorter)."""
    low, high = KNOBS["step_overhead_ms"]
    smallest = min(s.time_ms for s in samples)
    return {"step_overhead_ms": (min(low, smallest), min(high, smallest))}


RunObjective = Callable[[RooflineCostConfig], float]
OUTSIDE_PENALTY = 1.0
"""Score a request-level fit adds per unit of log distance a candidate lies outside the bounds
(priced at the nearest point inside): a slope back in, where an infinite score would not do."""
SIMPLEX_STEP = math.log(1.5)
"""Edge of Nelder–Mead's first simplex in log space: each knob first tries 1.5× its start.
(scipy's default edge is 5 % of the coordinate, i.e. ~0 for a knob starting at 1 ms, whose
log is 0: such a knob would hardly move.)"""


def fit_run(
    start: RooflineCostConfig,
    objective: RunObjective,
    knobs: Sequence[str],
    *,
    max_evaluations: int = 150,
    prior: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> FitResult:
    """The knobs minimising ``objective`` (a simulated run's mean abs. relative error ``e``)
    with, unless ``prior`` is False, the weak log-space prior centred on ``start`` added as in
    the step fit: ``sqrt(e² + Σ (PRIOR_DATA_SCALE · Δlog / sigma)²)``. ``progress(done,
    budget)`` after each evaluation."""
    knobs = check_knobs(knobs)
    count = 0
    x0 = _start(start, knobs)
    weight = _prior_weights(knobs, prior)

    low, high = np.log([KNOBS[k] for k in knobs]).T

    def score(x: np.ndarray) -> float:
        nonlocal count
        count += 1
        if progress is not None:  # evaluations so far of the budget
            progress(count, max(max_evaluations, count))
        inside = np.clip(x, low, high)  # the nearest point within the bounds, and how far out
        error = objective(_with(start, knobs, inside))
        prior_term = float(np.sum((weight * (inside - x0)) ** 2))
        return math.sqrt(error**2 + prior_term) + OUTSIDE_PENALTY * np.sum(np.abs(x - inside))

    start_error = score(x0)
    # each knob's first step goes 1.5× up, or down where up leaves its bounds
    steps = np.where(x0 + SIMPLEX_STEP <= high, SIMPLEX_STEP, -SIMPLEX_STEP)
    simplex = np.vstack([x0, x0 + np.diag(steps)])
    result = minimize(
        score,
        x0,
        method="Nelder-Mead",
        options={"maxfev": max_evaluations, "xatol": 1e-3, "fatol": 1e-4,
                 "initial_simplex": simplex},
    )  # fmt: skip
    best = np.clip(result.x, low, high)
    if score(best) > start_error:  # a budget that ran out above the start keeps the start
        best = x0
    fitted = _with(start, knobs, best)
    return FitResult(start, fitted, knobs, objective(fitted), start_error, count)
