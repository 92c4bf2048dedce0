"""The Python API for notebooks: :func:`simulate` a config, get frames and summary back.

    import simkv
    run = simkv.simulate("configs/quickstart.yaml", workload__limit=500)
    run.summary["p99_ttft_ms"]; run.requests; run.steps; run.itl

Overrides are keyword arguments named by the key path with ``__`` for each dot
(``kv_cache__block_size=32`` is ``--set kv_cache.block_size=32``); values are Python values.
Nothing is written to disk (:func:`simkv.run.write_run` does that).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simkv.config.base import parse_yaml, validate
from simkv.config.sim import SimConfig, apply_overrides, dump_resolved
from simkv.metrics.summary import DEFAULT_PERCENTILES
from simkv.run import RunOutput, load_config
from simkv.run import simulate as run_config


def _set_items(overrides: dict[str, Any]) -> list[str]:
    """Keyword overrides as ``--set`` items (JSON values are YAML values)."""
    return [f"{key.replace('__', '.')}={json.dumps(value)}" for key, value in overrides.items()]


def simulate(
    config: str | Path | SimConfig,
    *,
    base_dir: str | Path | None = None,
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES,
    check_invariants: bool = False,
    **overrides: Any,
) -> RunOutput:
    """Run one simulation of ``config`` (a YAML path or a :class:`SimConfig`) with ``overrides``.

    Paths in the config (traces, tables) are relative to the YAML file, or to ``base_dir``
    (default: the working directory) for a :class:`SimConfig`. Errors in the config raise
    :class:`simkv.errors.InputError`. Returns the run's frames (``requests``, ``steps``,
    ``itl``) and ``summary`` (:mod:`simkv.metrics.summary`).
    """
    if isinstance(config, SimConfig):
        doc = parse_yaml(dump_resolved(config), "<SimConfig>")
        apply_overrides(doc, _set_items(overrides))
        cfg = validate(SimConfig, doc)
        where = Path(base_dir) if base_dir is not None else Path.cwd()
    else:
        cfg = load_config(config, _set_items(overrides))
        where = Path(base_dir) if base_dir is not None else Path(config).parent
    return run_config(cfg, where, percentiles=percentiles, check_invariants=check_invariants)
