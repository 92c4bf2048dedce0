"""Build tiny runs whose timelines can be computed by hand.

Cost: a step of n tokens takes 10 + n ms (a ``table`` cost model with two points); a request
list is written as a generic CSV trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from typer.testing import CliRunner

from simkv.cli import app
from simkv.config.sim import SimConfig
from simkv.engine.capacity import KVSizing
from simkv.engine.engine import Engine
from simkv.run import RunOutput, build, simulate


def build_engine(cfg: SimConfig, base_dir: Path, **build_args: Any) -> tuple[Engine, KVSizing]:
    """The engine of a run without ``fleet:``, built by the run path (:func:`simkv.run.build`,
    ``build_args`` as it takes them), and its KV pool."""
    run = build(cfg, base_dir, **build_args)
    return run.engine, run.inputs.groups[0].sizing


def tiny_data(
    tmp_path: Path,
    requests: list[tuple[float, int, int]],
    scheduler: dict[str, Any],
    *,
    num_blocks: int,
    block_size: int = 4,
    max_model_len: int = 16,
    **extra: Any,
) -> dict[str, Any]:
    """The config document (trace and step table written into ``tmp_path``) over
    ``requests`` = [(arrival_s, prompt_tokens, output_tokens), ...]."""
    trace = tmp_path / "trace.csv"
    rows = ["arrival_s,prompt_tokens,output_tokens"]
    rows += [f"{a},{p},{o}" for a, p, o in requests]
    trace.write_text("\n".join(rows) + "\n")
    workload = {"kind": "trace", "path": str(trace), "format": "generic",
                "columns": {"arrival_s": "arrival_s"}}  # fmt: skip
    return tiny_document(tmp_path, "tiny", workload, scheduler, num_blocks=num_blocks,
                         block_size=block_size, max_model_len=max_model_len, **extra)  # fmt: skip


def tiny_document(
    tmp_path: Path,
    name: str,
    workload: dict[str, Any],
    scheduler: dict[str, Any],
    *,
    num_blocks: int,
    block_size: int,
    max_model_len: int,
    **extra: Any,
) -> dict[str, Any]:
    """A config document over ``workload`` with Llama-2-7B's shapes on an A100-80GB, an explicit
    KV pool and a two-point step table (a step of n tokens takes 10 + n ms; written into
    ``tmp_path``), so hand-computed times do not move with the cost model's defaults."""
    table = tmp_path / "steps.csv"
    table.write_text("num_tokens,step_time_ms\n1,11\n100,110\n")
    data: dict[str, Any] = {
        "name": name,
        "workload": workload,
        "model": {"preset": "llama-2-7b", "max_model_len": max_model_len},
        "gpu": "a100-80gb",
        "kv_cache": {"block_size": block_size, "num_blocks": num_blocks},
        "scheduler": scheduler,
        "cost_model": {"kind": "table", "path": str(table)},
    }
    data.update(extra)
    return data


def tiny_config(
    tmp_path: Path,
    requests: list[tuple[float, int, int]],
    scheduler: dict[str, Any],
    **keywords: Any,
) -> SimConfig:
    """:func:`tiny_data`'s document (same arguments), validated as a config."""
    data = tiny_data(tmp_path, requests, scheduler, **keywords)
    return SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))


def cli_run(tmp_path: Path, data: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``simkv run CONFIG --out DIR --check`` on the config document ``data`` (the real
    command: config file, validation, engine, written frames); returns the run's
    (steps, requests) frames as written, requests indexed by ``req_id``."""
    config, out = tmp_path / "config.yaml", tmp_path / "out"
    config.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(out), "--check"])
    if result.exit_code != 0:
        raise AssertionError(f"simkv run failed ({result.exit_code}): {result.output}")
    steps = pd.read_parquet(out / "steps.parquet")
    return steps, pd.read_parquet(out / "requests.parquet").set_index("req_id")


def run(cfg: SimConfig, tmp_path: Path) -> RunOutput:
    """Simulate with invariants checked after every step."""
    return simulate(cfg, tmp_path, check_invariants=True)
