"""Measurements of real serving engines, read: runs, step-time tables, kernel profiles.

``read_measured_run(path)`` reads an LLMServingSim-style vLLM run folder, a
``vllm bench serve --save-detailed`` JSON, or a generic CSV into a :class:`MeasuredRun`;
``engine_overrides`` maps its engine settings onto simkv config keys (``check_single_engine``
refuses a run served by several engines side by side). :mod:`simkv.measured.step_sources`
reads published step times (DistServe, Splitwise), :mod:`simkv.measured.step_table` simkv's
step-time CSV, :mod:`simkv.measured.profiles` measured kernel times of one decoder layer
(LLMServingSim's layer profiles).

This package only reads: it imports nothing above :mod:`simkv.config`. Others use what it
reads: :func:`simkv.workload.replay.measured_workload` replays a run as a workload (a
``kind: measured`` workload in a config), :func:`simkv.metrics.measured.measured_metrics`
summarises it with simkv's conventions and key names, :mod:`simkv.calibrate` fits to it.
"""

from simkv.measured.engine import engine_overrides
from simkv.measured.generic import read_generic, write_generic_csv
from simkv.measured.read import check_single_engine, read_engine_settings, read_measured_run
from simkv.measured.runs import EngineSettings, MeasuredRun

__all__ = [
    "EngineSettings",
    "MeasuredRun",
    "check_single_engine",
    "engine_overrides",
    "read_engine_settings",
    "read_generic",
    "read_measured_run",
    "write_generic_csv",
]
