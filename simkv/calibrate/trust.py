"""How far to trust a calibration: held-out error, the residual pattern, and a verdict.

After a fit, ``simkv calibrate`` prints three things beside the in-sample error:

* **held-out error** (:func:`holdout`, step-level fits): with steps of several (model, GPU,
  tensor-parallel degree) groups, each group is left out in turn, the same knobs are fitted to
  the others and the group is predicted (leave one group out: the error of using the profile
  on a configuration it has not seen); with one group, the steps are split into two halves
  (alternate steps in the source's order) and each half is predicted from a fit to the other.
  A request-level fit re-simulates its runs at every evaluation, so it gets no held-out fit
  (:data:`NO_HOLDOUT`); ``simkv compare`` with the profile on another run is the check.
* **the residual pattern** (:func:`residual_pattern`): within each phase, the rank correlation
  (Spearman) of each step's log error with its batch size, its context per sequence, its
  tokens and its tensor-parallel degree, and how far apart the highest and lowest thirds of
  the steps along it come out; the widest, when its correlation reaches :data:`PATTERN_RHO`
  and its spread :data:`PATTERN_SPREAD`, is what the model leaves unexplained, e.g.
  "predicted / measured falls 12 % from its lowest to its highest third" of the batch size: a
  cost growing with the batch is missing.
* **a verdict** (:func:`verdict`): ``transferable`` when every fitted knob lies in its range
  (:func:`simkv.calibrate.plausible.knob_state`), else the first knob out of it with the
  effect most likely behind it (:data:`simkv.calibrate.plausible.SUSPECTS`).

A step-level fit's :class:`Trust` also carries the range of steps it saw and the fitted knobs
it extrapolates beyond them (:mod:`simkv.calibrate.coverage`, on this module's axes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr

from simkv.calibrate.fit import step_errors
from simkv.calibrate.plausible import knob_state, suspect
from simkv.calibrate.steps import StepSample
from simkv.config.cost import RooflineCostConfig

PATTERN_RHO = 0.3
"""Least |Spearman ρ| between the steps' log errors and an axis for the residuals to count as
trending along it (a moderate rank correlation; below it the residuals look like noise)."""
PATTERN_SPREAD = 0.05
"""Least difference in mean log error between the highest and the lowest third of a phase's
steps along an axis for a trend to be reported (5 %: below, the trend is real but too small
to change an answer)."""
MIN_PATTERN_STEPS = 5
"""Fewest steps of one phase whose residuals are ranked (fewer say nothing about a trend)."""
NO_HOLDOUT = (
    "held out: none at request level (each fit re-simulates its runs); check the profile on "
    "another run with simkv compare"
)
AXES: tuple[str, ...] = ("batch size", "context per sequence", "tokens", "tensor-parallel degree")
"""The axes the residual pattern ranks the steps along (:func:`axis_values`)."""

Fitter = Callable[[RooflineCostConfig, Sequence[StepSample], Sequence[str]], RooflineCostConfig]
"""Fits ``knobs`` of a start config to step samples (:func:`simkv.calibrate.fit.fit_steps`)."""


@dataclass(frozen=True)
class Holdout:
    """A held-out error: ``how`` it was split, the mean abs. error over the held-out steps,
    and the worst part (its name and error)."""

    how: str
    error: float
    worst: tuple[str, float]

    def line(self) -> str:
        name, error = self.worst
        return (f"held out ({self.how}): {self.error:.1%} mean abs. error; worst {name} "
                f"{error:.1%}")  # fmt: skip


def _groups(samples: Sequence[StepSample]) -> dict[str, list[int]]:
    """Sample indices by (model, GPU, tensor-parallel degree), named ``model gpu TPn``."""
    out: dict[str, list[int]] = {}
    for i, s in enumerate(samples):
        out.setdefault(f"{s.model} {s.gpu} TP{s.tensor_parallel}", []).append(i)
    return out


def holdout_parts(samples: Sequence[StepSample]) -> tuple[str, dict[str, list[int]]]:
    """How the steps are split and the parts held out in turn (name → sample indices):
    the (model, GPU, TP) groups when there are several, else alternate halves."""
    groups = _groups(samples)
    if len(groups) > 1:
        return "leave one group out", groups
    return "alternate halves", {"even steps": list(range(0, len(samples), 2)),
                                "odd steps": list(range(1, len(samples), 2))}  # fmt: skip


def holdout(
    start: RooflineCostConfig,
    samples: Sequence[StepSample],
    knobs: Sequence[str],
    fit: Fitter,
    on_fit: Callable[[], None] | None = None,
) -> Holdout | None:
    """The held-out error of a step-level fit (see the module docstring); None with fewer than
    four steps (no half could be fitted). ``on_fit()`` after each held-out fit."""
    if len(samples) < 4:
        return None
    how, parts = holdout_parts(samples)
    errors: list[np.ndarray] = []
    worst = ("", -1.0)
    for name, held in parts.items():
        kept = set(held)
        train = [s for i, s in enumerate(samples) if i not in kept]
        fitted = fit(start, train, knobs)
        err = np.abs(step_errors(fitted, [samples[i] for i in held]))
        errors.append(err)
        if float(err.mean()) > worst[1]:
            worst = (name, float(err.mean()))
        if on_fit is not None:
            on_fit()
    return Holdout(how, float(np.concatenate(errors).mean()), worst)


def axis_values(samples: Sequence[StepSample]) -> list[np.ndarray]:
    """Each step's batch size, context per sequence, tokens and TP degree (:data:`AXES`)."""
    seqs = np.array([s.work.num_seqs for s in samples], np.float64)
    kv = np.array([s.work.kv_read_tokens for s in samples], np.float64)
    tokens = np.array([s.work.num_tokens for s in samples], np.float64)
    tp = np.array([s.tensor_parallel for s in samples], np.float64)
    return [seqs, kv / np.maximum(seqs, 1), tokens, tp]


def residual_pattern(cfg: RooflineCostConfig, samples: Sequence[StepSample]) -> str | None:
    """The strongest trend of the steps' log errors within one phase (prefill, decode or
    mixed steps: their costs differ in kind, so pooled they hide each other's trends), as a
    sentence; None when none reaches :data:`PATTERN_RHO`."""
    log_error = np.log1p(step_errors(cfg, samples))
    axes = axis_values(samples)
    phases = np.array([s.phase for s in samples])
    best: tuple[float, float, int, str] = (0.0, 0.0, -1, "")
    for phase in sorted(set(phases.tolist())):
        rows = phases == phase
        if rows.sum() < MIN_PATTERN_STEPS:
            continue
        for k, values in enumerate(axes):
            if len(np.unique(values[rows])) < 3 or np.ptp(log_error[rows]) < 1e-12:
                continue  # too few levels to rank (one TP degree, …), or nothing to explain
            rho = float(spearmanr(values[rows], log_error[rows]).statistic)
            spread = _spread(values[rows], log_error[rows])
            if abs(rho) >= PATTERN_RHO and abs(spread) >= PATTERN_SPREAD and \
                    abs(spread) > abs(best[1]):  # fmt: skip
                best = (rho, spread, k, phase)
    rho, spread, k, phase = best
    if k < 0:
        return None
    axis = AXES[k]
    verb, fix = ("falls", "missing or under-priced") if spread < 0 else ("rises", "over-priced")
    return (f"residuals of the {phase} steps trend with {axis} (Spearman ρ {rho:+.2f}): "
            f"predicted / measured {verb} {abs(math.expm1(spread)):.0%} from its lowest to its "
            f"highest third; a cost growing with {axis} is {fix}")  # fmt: skip


def _spread(values: np.ndarray, log_error: np.ndarray) -> float:
    """Mean log error of the third of the steps highest along an axis minus that of the
    lowest third (ties keep their order: a stable sort)."""
    order = np.argsort(values, kind="stable")
    third = max(len(order) // 3, 1)
    return float(log_error[order[-third:]].mean() - log_error[order[:third]].mean())


def verdict(cfg: RooflineCostConfig, knobs: Sequence[str]) -> str:
    """One line: ``transferable`` when every fitted knob lies inside its range, off its bounds
    (:func:`simkv.calibrate.plausible.knob_state`), else the first knob that does not and
    the effect most likely behind it."""
    out = []
    for knob in knobs:
        value = getattr(cfg, knob)
        state = knob_state(knob, value)
        if state != "within":
            where = "outside its range" if state == "outside" else "at a bound of its range"
            out.append(f"{knob} {value:.4g} {where}: {suspect(knob, value)}")
    if not out:
        return "verdict: transferable (every fitted knob within its range)"
    more = f" (and {len(out) - 1} more knob{'s' if len(out) > 2 else ''})" if len(out) > 1 else ""
    return f"verdict: not transferable: {out[0]}{more}"


@dataclass(frozen=True)
class Trust:
    """What ``simkv calibrate`` prints after a fit on how far to trust it: the held-out line,
    the residual pattern (None when none trends), the verdict and, for a step fit, the range
    its steps span and the knobs it extrapolates (:mod:`simkv.calibrate.coverage`)."""

    holdout: str
    pattern: str | None
    verdict: str
    data_range: str | None = None  # step level (simkv.calibrate.coverage)
    extrapolation: str | None = None  # step level, when a fitted knob is poorly seen

    def lines(self) -> list[str]:
        """The lines as printed: held out, the data range, the pattern, the extrapolation
        (each of those three when there is one), the verdict."""
        said = (self.data_range, self.pattern, self.extrapolation)
        return [self.holdout, *(line for line in said if line is not None), self.verdict]


def step_trust(
    start: RooflineCostConfig,
    fitted: RooflineCostConfig,
    samples: Sequence[StepSample],
    knobs: Sequence[str],
    fit: Fitter,
    on_fit: Callable[[], None] | None = None,
) -> Trust:
    """The :class:`Trust` of a step-level fit of ``knobs`` (from ``start`` to ``fitted``)."""
    held = holdout(start, samples, knobs, fit, on_fit)
    pattern = residual_pattern(fitted, samples)
    line = "held out: none (fewer than four steps)" if held is None else held.line()
    return Trust(line, pattern, verdict(fitted, knobs))


def run_trust(fitted: RooflineCostConfig, knobs: Sequence[str]) -> Trust:
    """The :class:`Trust` of a request-level fit: no held-out fit, no step residuals."""
    return Trust(NO_HOLDOUT, None, verdict(fitted, knobs))
