"""Measurements of real serving engines: read them, summarise them, replay them as workloads.

``read_measured_run(path)`` reads an LLMServingSim-style vLLM run folder, a
``vllm bench serve --save-detailed`` JSON, or a generic CSV into a :class:`MeasuredRun`;
``simkv.measured.metrics.measured_metrics`` summarises it with simkv's conventions and key
names;
``engine_overrides`` maps its engine settings onto simkv config keys (``check_single_engine``
refuses a run served by several engines side by side); ``measured_workload``
turns it into a :class:`~simkv.workload.request.Workload` (a ``kind: measured`` workload in a
config does this). :mod:`simkv.measured.profiles` reads measured kernel times of one decoder
layer (LLMServingSim's layer profiles).
"""

from simkv.measured.engine import engine_overrides
from simkv.measured.generic import read_generic, write_generic_csv
from simkv.measured.read import check_single_engine, read_engine_settings, read_measured_run
from simkv.measured.replay import measured_workload
from simkv.measured.runs import EngineSettings, MeasuredRun

__all__ = [
    "EngineSettings",
    "MeasuredRun",
    "check_single_engine",
    "engine_overrides",
    "measured_workload",
    "read_engine_settings",
    "read_generic",
    "read_measured_run",
    "write_generic_csv",
]
