"""Policy sweeps: expand a sweep file into runs, execute them, collect ``sweep.parquet``."""

from simkv.sweep.executors import (
    EXECUTOR_KINDS,
    Executor,
    ProcessExecutor,
    RayExecutor,
    SerialExecutor,
    make_executor,
)
from simkv.sweep.run import SweepResult, default_out_dir, run_sweep
from simkv.sweep.spec import PlannedRun, SweepPlan, SweepSpec, load_sweep

__all__ = [
    "EXECUTOR_KINDS",
    "Executor",
    "PlannedRun",
    "ProcessExecutor",
    "RayExecutor",
    "SerialExecutor",
    "SweepPlan",
    "SweepResult",
    "SweepSpec",
    "default_out_dir",
    "load_sweep",
    "make_executor",
    "run_sweep",
]
