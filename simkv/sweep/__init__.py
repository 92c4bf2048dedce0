"""Policy sweeps: expand a sweep file into runs, execute them, collect ``sweep.parquet``.

The names below are imported on first use (PEP 562), so that ``simkv.sweep.executors`` (the
executor kinds the CLI lists) does not pull in the runner and the engine.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "EXECUTOR_KINDS": "executors", "Executor": "executors", "ProcessExecutor": "executors",
    "RayExecutor": "executors", "SerialExecutor": "executors", "make_executor": "executors",
    "SweepResult": "run", "default_out_dir": "run", "run_sweep": "run",
    "PlannedRun": "spec", "SweepPlan": "spec", "SweepSpec": "spec", "load_sweep": "spec",
}  # fmt: skip
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
