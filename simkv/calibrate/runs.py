"""Request-level calibration: simulate a measured run's replay and score it against the run.

The replay config is the user's (``--config``, a ``kind: measured`` workload) or is built from
the measurement itself: its engine settings (:func:`simkv.run.load.apply_measured_engine`)
and the model and GPU presets whose aliases match the names the measurement recorded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import yaml

from simkv.config.base import parse_yaml, validate
from simkv.config.cost import RooflineCostConfig
from simkv.config.limits import as_folder_name
from simkv.config.sim import SimConfig
from simkv.errors import InputError
from simkv.measured import MeasuredRun
from simkv.metrics.validation import Validation, compare_metrics, simulated_request_frame
from simkv.presets import find_preset
from simkv.run import simulate
from simkv.run.load import apply_measured_engine, load_config

__all__ = ["replay_config", "replay_validation", "run_objective"]


def _preset(kind: str, recorded: str | None, given: str | None, source: Path) -> str:
    what = "model" if kind == "models" else "GPU"
    name = given or recorded
    if name is None:
        raise InputError(
            f"the measurement does not name its {what}: pass --{what.lower()}", file=source
        )
    preset = find_preset(kind, name)  # type: ignore[arg-type]
    if preset is None:
        raise InputError(
            f"no {what} preset matches {name!r}: pass --{what.lower()} with a "
            "preset name (simkv validate lists them in the schema)",
            file=source,
        )
    return preset


def replay_config(
    run: MeasuredRun,
    *,
    config: Path | None = None,
    model: str | None = None,
    gpu: str | None = None,
) -> tuple[SimConfig, Path]:
    """The config replaying ``run`` and the folder its relative paths resolve against."""
    if config is not None:
        cfg = load_config(config)
        if cfg.workload.kind != "measured":
            raise InputError(
                "the replay config needs a kind: measured workload",
                file=config,
                field="workload.kind",
            )
        return cfg, config.parent
    engine = run.engine
    data = {
        "name": as_folder_name(f"calibrate-{run.label}"),
        "workload": {"kind": "measured", "path": str(run.source.resolve())},
        "model": _preset("models", engine.model if engine else None, model, run.source),
        "gpu": _preset("gpus", engine.gpu if engine else None, gpu, run.source),
        "scheduler": {"kind": "vllm_v1"},
    }
    doc = parse_yaml(yaml.safe_dump(data), str(run.source / "(replay config)"))
    apply_measured_engine(doc)
    return validate(SimConfig, doc), run.source


RunObjective = Callable[[RooflineCostConfig], float]


def replay_validation(
    cfg: SimConfig, base_dir: Path, run: MeasuredRun, cost: RooflineCostConfig
) -> Validation:
    """The replay of ``run`` simulated with ``cost``, compared with the run per metric."""
    out = simulate(cfg.model_copy(update={"cost_model": cost}), base_dir)
    return compare_metrics(run.requests, simulated_request_frame(out.frames.requests))


def run_objective(cfg: SimConfig, base_dir: Path, run: MeasuredRun) -> RunObjective:
    """``cost → mean abs. relative error`` (a fraction) of the replay simulated with ``cost``:
    the headline of :func:`replay_validation` (TTFT, TPOT, E2E × mean, p50, p90, p99)."""

    def objective(cost: RooflineCostConfig) -> float:
        headline = replay_validation(cfg, base_dir, run, cost).mean_abs_diff_pct
        return math.inf if headline is None else headline / 100

    return objective
