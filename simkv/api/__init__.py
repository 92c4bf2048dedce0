"""The Python API for notebooks and scripts: the CLI's commands as functions that return
frames and answers, writing files only when given a folder (``out=``).

    import simkv
    run = simkv.simulate("configs/quickstart.yaml", workload__limit=500)
    run.summary["p99_ttft_ms"]; run.requests.join(run.latencies)   # ttft_ms, tpot_ms, e2el_ms
    run.report("reports/quickstart")                               # what `simkv run` writes
    grid = simkv.sweep({"name": "bs", "base": "configs/quickstart.yaml",
                        "grid": {"kv_cache.block_size": [16, 32]}})
    grid.table; grid.summary                                       # sweep.parquet, headline
    simkv.capacity("configs/quickstart.yaml", workload__limit=500).answer  # capacity.json
    simkv.compare(run, measured="measured.csv").table      # simkv compare, Diff% per metric

Config overrides are keyword arguments named by the key path with ``__`` for each dot
(``kv_cache__block_size=32`` is ``--set kv_cache.block_size=32``); values are Python values.
Bad input raises :class:`simkv.errors.InputError` (``str(err)``: the CLI's one line).
:mod:`simkv.api.runs` holds :func:`simulate`, :class:`Run` and :func:`compare`;
:mod:`simkv.api.searches` holds :func:`sweep` and :func:`capacity`.
"""

from simkv.api.runs import Comparison, Run, RunOutput, compare, simulate
from simkv.api.searches import CapacityOutput, SweepOutput, capacity, sweep

__all__ = [
    "CapacityOutput", "Comparison", "Run", "RunOutput", "SweepOutput", "capacity", "compare",
    "simulate", "sweep",
]  # fmt: skip
