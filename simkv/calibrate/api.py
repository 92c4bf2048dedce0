"""``simkv calibrate`` as a library call: read the source, pick the knobs, fit, report.

A source is either step-level (:func:`simkv.calibrate.steps.is_step_table`: a DistServe
profile, a Splitwise table, a generic step CSV) or a measured run
(:func:`simkv.measured.read_measured_run`); the fit starts from ``start`` (the roofline
defaults unless a profile is given) and changes only ``knobs``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simkv.calibrate.coverage import covered
from simkv.calibrate.fit import FitResult, check_knobs, fit_run, fit_steps, step_errors
from simkv.calibrate.runs import replay_config, replay_validation, run_objective
from simkv.calibrate.steps import StepSample, is_step_table, read_step_samples
from simkv.calibrate.trust import Trust, holdout_parts, run_trust, step_trust
from simkv.config.cost import RooflineCostConfig
from simkv.config.hardware import load_gpu_preset
from simkv.config.sim import SimConfig
from simkv.errors import InputError
from simkv.measured import MeasuredRun, read_measured_run
from simkv.metrics.validation import Validation

__all__ = [
    "RUN_KNOBS", "STEP_KNOBS", "Calibration", "calibrate", "clocked", "residual_rows", "step_knobs",
]  # fmt: skip

STEP_KNOBS = (
    "step_overhead_ms",
    "seq_overhead_ms",
    "prefill_overhead_ms",
    "gemm_efficiency",
    "kv_read_efficiency",
    "attention_efficiency",
)
"""Knobs a step-level fit changes by default (plus, when tp > 1, the per-worker and all-reduce
ones: :func:`step_knobs`). The weight-read efficiency keeps its value (0.9 of the HBM spec):
streaming the weights costs the same in every step, so step data confound it with the fixed
overhead and, across tp degrees, with the all-reduce latency's growth. Fitted anyway, it
runs to the ends of its physical range (DistServe's OPT-13B to the top, Splitwise's
Llama-2-70B to the bottom; unbounded, they went to 1 and 0.66) and extrapolates badly: held
out on Splitwise TP 8, decode steps came out about 16 % slow with it fitted unbounded, within
3 % with it held (benchmarks/sim_vs_real.py)."""
RUN_KNOBS = ("step_overhead_ms", "seq_overhead_ms", "gemm_efficiency", "kv_read_efficiency")
"""Knobs a request-level fit changes by default: each run simulation costs a fraction of a
second, so four — the host overheads, which set TPOT at small batches, and the two
efficiencies that price prefill (GEMM) and large decode batches (KV reads). The weight-read
efficiency, confounded with the fixed overhead in request-level data, keeps its value."""


@dataclass(frozen=True)
class Calibration:
    """A finished fit: the result, what kind of data it used, and what to print."""

    result: FitResult
    level: str  # "step" or "request"
    label: str
    samples: tuple[StepSample, ...] = ()
    notes: list[str] = field(default_factory=list)
    validations: tuple[tuple[str, Validation], ...] = ()  # request level: each run, fitted
    trust: Trust | None = None  # held-out error, data range, pattern, extrapolation, verdict


def step_knobs(samples: Sequence[StepSample]) -> tuple[str, ...]:
    """The knobs a step-level fit of ``samples`` changes by default: :data:`STEP_KNOBS`, plus,
    when some step ran at tp > 1, the per-worker overhead and the all-reduce knobs of the links
    those steps used."""
    if all(s.tensor_parallel == 1 for s in samples):
        return STEP_KNOBS
    links = {load_gpu_preset(s.gpu).interconnect for s in samples if s.tensor_parallel > 1}
    hops = tuple(f"{link}_hop_latency_us" for link in sorted(links))
    tp = ("worker_overhead_ms", "allreduce_latency_us", *hops, "interconnect_efficiency")
    return (*STEP_KNOBS, *tp)


def clocked(start: RooflineCostConfig, samples: Sequence[StepSample]) -> RooflineCostConfig:
    """``start`` with ``latency_clock_mhz`` set to the boost clock of the one GPU every sample
    ran on, so the fitted fixed latencies scale by clock on another GPU
    (:func:`simkv.config.cost.latency_scale`; on the fitted GPU the factor is 1, so the fit is
    unchanged). ``start`` as it is when it already names a clock, when the samples span
    several GPUs, or when the GPU's clock is unknown."""
    gpus = {s.gpu for s in samples}
    if start.latency_clock_mhz is not None or len(gpus) != 1:
        return start
    clock = load_gpu_preset(gpus.pop()).boost_clock_mhz
    return start if clock is None else start.model_copy(update={"latency_clock_mhz": clock})


def _step_samples(
    sources: Sequence[Path], model: str | None, gpu: str | None, tp: Sequence[int] | None
) -> list[StepSample]:
    samples = [s for source in sources for s in read_step_samples(source, model=model, gpu=gpu)]
    if tp:
        samples = [s for s in samples if s.tensor_parallel in tp]
        if not samples:
            where = sources[0] if len(sources) == 1 else None
            raise InputError(f"no steps at tensor-parallel degrees {list(tp)}", file=where,
                             field="--tp")  # fmt: skip
    return samples


Replay = tuple[MeasuredRun, SimConfig, Path]


def _replays(
    sources: Sequence[Path], configs: Sequence[Path], model: str | None, gpu: str | None
) -> list[Replay]:
    if configs and len(configs) != len(sources):
        raise InputError(f"give one --config per measured run ({len(sources)}), or none",
                         field="--config")  # fmt: skip
    replays = []
    for i, source in enumerate(sources):
        run = read_measured_run(source)
        config = configs[i] if configs else None
        cfg, base_dir = replay_config(run, config=config, model=model, gpu=gpu)
        if not isinstance(cfg.cost_model, RooflineCostConfig):
            raise InputError("calibration fits the roofline; the replay config has a table",
                             file=config, field="cost_model.kind")  # fmt: skip
        replays.append((run, cfg, base_dir))
    return replays


def _label(sources: Sequence[Path]) -> str:
    return "+".join(source.stem if source.is_file() else source.name for source in sources)


def calibrate(
    sources: Sequence[Path],
    *,
    start: RooflineCostConfig | None = None,
    knobs: Sequence[str] | None = None,
    configs: Sequence[Path] = (),
    model: str | None = None,
    gpu: str | None = None,
    tp: Sequence[int] | None = None,
    max_evaluations: int = 150,
    progress: Callable[[int, int], None] | None = None,
) -> Calibration:
    """Fit ``knobs`` of ``start`` (default: the roofline's defaults) to every source at once:
    step tables pooled into one least-squares fit, measured runs by the mean of their replays'
    errors (``configs``: one replay config per run, else each is built from its run). All
    sources are of one level. Every problem is an :class:`InputError`. ``progress(done,
    budget)``: the request-level fit's simulations, or the step-level fits (the fit, then one
    per held-out part: :func:`simkv.calibrate.trust.holdout`)."""
    start = start or RooflineCostConfig()
    if not sources:
        raise InputError("give at least one source")
    for source in sources:
        if not source.exists():
            raise InputError("no such file or folder", file=source)
    steps = [source.is_file() and is_step_table(source) for source in sources]
    if any(steps) and not all(steps):
        raise InputError("mix of step tables and measured runs: calibrate them separately")
    if all(steps):
        samples = _step_samples(sources, model, gpu, tp)
        start = clocked(start, samples)
        chosen = check_knobs(knobs) if knobs else step_knobs(samples)
        fits = 1 + len(holdout_parts(samples)[1]) if len(samples) >= 4 else 1
        done = [0]

        def fitted() -> None:
            done[0] += 1
            if progress is not None:
                progress(done[0], fits)

        result = fit_steps(start, samples, chosen)
        fitted()
        trust = step_trust(start, result.config, samples, chosen, _refit, fitted)
        trust = covered(trust, result.config, samples, chosen)
        return Calibration(result, "step", _label(sources), tuple(samples), trust=trust)
    replays = _replays(sources, configs, model, gpu)
    objectives = [run_objective(cfg, base_dir, run) for run, cfg, base_dir in replays]

    def joint(cost: RooflineCostConfig) -> float:
        return sum(objective(cost) for objective in objectives) / len(objectives)

    chosen = check_knobs(knobs) if knobs else RUN_KNOBS
    result = fit_run(start, joint, chosen, max_evaluations=max_evaluations, progress=progress)
    validations = tuple(
        (run.label, replay_validation(cfg, base_dir, run, result.config))
        for run, cfg, base_dir in replays
    )
    notes = [note for run, _, _ in replays for note in run.notes]
    return Calibration(result, "request", _label(sources), notes=notes, validations=validations,
                       trust=run_trust(result.config, chosen))  # fmt: skip


def _refit(
    start: RooflineCostConfig, samples: Sequence[StepSample], knobs: Sequence[str]
) -> RooflineCostConfig:
    """A step fit's config (the held-out fits of :func:`simkv.calibrate.trust.holdout`)."""
    return fit_steps(start, samples, knobs).config


def residual_rows(cal: Calibration) -> list[tuple[str, int, str, int, float, float]]:
    """Step-level fit quality per (model, tp, phase): ``(model, tp, phase, steps, mean abs.
    relative error, mean relative error)``, errors as fractions."""
    errors = step_errors(cal.result.config, cal.samples)
    groups: dict[tuple[str, int, str], list[float]] = {}
    for sample, error in zip(cal.samples, errors, strict=True):
        key = (sample.model, sample.tensor_parallel, sample.phase)
        groups.setdefault(key, []).append(float(error))
    rows = []
    for (model, tp, phase), errs in sorted(groups.items()):
        values = np.array(errs)
        rows.append(
            (model, tp, phase, len(errs), float(np.abs(values).mean()), float(values.mean()))
        )
    return rows
