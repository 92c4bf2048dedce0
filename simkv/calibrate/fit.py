"""Fitting the roofline's knobs to measurements, deterministically (scipy).

Knobs are fitted in log space within the bounds of :data:`KNOBS` (so an efficiency or an
overhead stays positive). Two kinds of data:

* **step samples** (:mod:`simkv.calibrate.steps`): ``scipy.optimize.least_squares`` (trust
  region reflective, a deterministic method) on the log-ratio of predicted to measured step
  times, so every step weighs by its relative error;
* **a measured run** (:mod:`simkv.measured`): the run is simulated with candidate knobs and the
  objective is the mean absolute relative error over TTFT, TPOT and E2E latency × mean, p50,
  p90, p99 (the validation summary users compare simulators by); Nelder–Mead (derivative
  free: the objective is piecewise constant at the scale of one step) from the starting config,
  with a fixed evaluation budget. The simulation is deterministic, so is the fit.
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

__all__ = ["KNOBS", "FitResult", "fit_run", "fit_steps", "step_errors"]

KNOBS: dict[str, tuple[float, float]] = {
    "step_overhead_ms": (1e-3, 500.0),
    "seq_overhead_ms": (1e-5, 10.0),
    "prefill_overhead_ms": (1e-4, 100.0),
    "gemm_efficiency": (0.02, 4.0),
    "weight_read_efficiency": (0.02, 4.0),
    "kv_read_efficiency": (0.02, 4.0),
    "attention_efficiency": (0.005, 4.0),
    "allreduce_latency_us": (0.1, 5000.0),
    "nvlink_hop_latency_us": (0.01, 1000.0),
    "pcie_hop_latency_us": (0.1, 5000.0),
    "interconnect_efficiency": (0.02, 4.0),
}
"""Every fittable knob of :class:`RooflineCostConfig` and its bounds (the fit stays inside)."""

_START_IF_ZERO = {
    "seq_overhead_ms": 0.01,
    "prefill_overhead_ms": 0.1,
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

    @property
    def at_bounds(self) -> tuple[str, ...]:
        """Knobs that ended within 1 % of a bound of :data:`KNOBS` (the data pushed them out
        of the physical range: a sign the model lacks a term the data has)."""
        out = []
        for knob in self.knobs:
            low, high = KNOBS[knob]
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


def _start(cfg: RooflineCostConfig, knobs: Sequence[str]) -> np.ndarray:
    values = []
    for name in knobs:
        low, high = KNOBS[name]
        value = getattr(cfg, name) or _START_IF_ZERO.get(name, low)
        values.append(math.log(min(max(value, low), high)))
    return np.array(values)


def _with(cfg: RooflineCostConfig, knobs: Sequence[str], x: np.ndarray) -> RooflineCostConfig:
    update = {name: float(math.exp(v)) for name, v in zip(knobs, x, strict=True)}
    return cfg.model_copy(update=update)


def _predict_ms(cfg: RooflineCostConfig, samples: Sequence[StepSample]) -> np.ndarray:
    models: dict[tuple[str, str, int], RooflineCostModel] = {}
    out = np.empty(len(samples))
    for i, s in enumerate(samples):
        key = (s.model, s.gpu, s.tensor_parallel)
        model = models.get(key)
        if model is None:
            model = models[key] = RooflineCostModel(
                cfg,
                load_model_preset(s.model),
                load_gpu_preset(s.gpu),
                tensor_parallel=s.tensor_parallel,
                block_size=16,
            )
        out[i] = model.step_time_s(s.work) * 1e3
    return out


def step_errors(cfg: RooflineCostConfig, samples: Sequence[StepSample]) -> np.ndarray:
    """Relative error of each sample's predicted step time: ``predicted / measured − 1``."""
    measured = np.array([s.time_ms for s in samples])
    return _predict_ms(cfg, samples) / measured - 1.0


def fit_steps(
    start: RooflineCostConfig, samples: Sequence[StepSample], knobs: Sequence[str]
) -> FitResult:
    """The knobs that best predict ``samples`` (least squares on log step-time ratios)."""
    knobs = check_knobs(knobs)
    if len(samples) < len(knobs):
        raise InputError(f"{len(samples)} steps cannot determine {len(knobs)} knobs", field="--fit")
    log_measured = np.log([s.time_ms for s in samples])
    count = 0

    def residuals(x: np.ndarray) -> np.ndarray:
        nonlocal count
        count += 1
        return np.log(_predict_ms(_with(start, knobs, x), samples)) - log_measured

    bounds = np.log([KNOBS[k] for k in knobs]).T
    x0 = _start(start, knobs)
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
    fitted = _with(start, knobs, result.x)
    return FitResult(
        start=start,
        config=fitted,
        knobs=knobs,
        error=float(np.mean(np.abs(step_errors(fitted, samples)))),
        start_error=float(np.mean(np.abs(step_errors(start, samples)))),
        evaluations=count,
    )


RunObjective = Callable[[RooflineCostConfig], float]


def fit_run(
    start: RooflineCostConfig,
    objective: RunObjective,
    knobs: Sequence[str],
    *,
    max_evaluations: int = 150,
) -> FitResult:
    """The knobs minimising ``objective`` (a simulated run's mean abs. relative error)."""
    knobs = check_knobs(knobs)
    count = 0

    def score(x: np.ndarray) -> float:
        nonlocal count
        count += 1
        bounds = np.log([KNOBS[k] for k in knobs])
        if np.any(x < bounds[:, 0]) or np.any(x > bounds[:, 1]):
            return math.inf
        return objective(_with(start, knobs, x))

    x0 = _start(start, knobs)
    start_error = score(x0)
    result = minimize(
        score,
        x0,
        method="Nelder-Mead",
        options={"maxfev": max_evaluations, "xatol": 1e-3, "fatol": 1e-4},
    )
    fitted = _with(start, knobs, result.x)
    return FitResult(start, fitted, knobs, float(result.fun), start_error, count)
