"""Reading a run folder back from disk, checking each file (a damaged folder names its file).

:func:`load_run` reads what :func:`simkv.run.write_run` writes and refuses, as an
:class:`InputError` naming the broken file: a missing file, a resolved config that is not UTF-8
YAML mapping, a ``summary.json`` that is not an object of numbers (or null / text for a few
labels), a parquet file that cannot be read or lacks the columns a report draws from, and a
requests table with no rows. Frames may be Parquet or CSV (:mod:`simkv.metrics.files`); files
are opened by local path (never read as a URI).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import yaml

from simkv.config.sim import dump_resolved
from simkv.errors import InputError
from simkv.metrics.files import FRAME_NAMES, frame_path, read_table
from simkv.metrics.recorder import STEP_COLUMNS, RunFrames
from simkv.metrics.slo import SLO_KEYS, slo_name
from simkv.text import parse_json

if TYPE_CHECKING:
    from simkv.run import RunOutput

RUN_FILES = ("summary.json", "config.resolved.yaml")  # and the frames, Parquet or CSV
_REQUEST_COLUMNS = ("arrival_s", "first_token_s", "finish_s", "prompt_tokens", "output_tokens",
                    "generated_tokens", "status")  # fmt: skip
_ITL_COLUMNS = ("itl_s", "count")


@dataclass(frozen=True)
class RunFolder:
    """One run folder read back from disk; ``config`` is the parsed resolved YAML."""

    path: Path
    config_text: str
    config: dict[str, Any]
    summary: dict[str, Any]
    frames: RunFrames
    replicas: pd.DataFrame | None = None  # a fleet run's per-replica table (replicas.json)

    @property
    def name(self) -> str:
        return str(self.config.get("name") or self.path.name)


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("damaged run file: not UTF-8 text", file=path) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", file=path) from None


def _read_summary(path: Path) -> dict[str, Any]:
    try:
        summary = parse_json(_read_text(path), path)
    except InputError:
        raise InputError("damaged run file: not JSON", file=path) from None
    if not isinstance(summary, dict):
        raise InputError("damaged run file: expected a JSON object", file=path)
    for key, value in summary.items():
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if value is None or _verdict_value(key, value):
            continue
        if not (number and math.isfinite(value)):
            raise InputError(f"damaged run file: {key} is not a finite number", file=path)
    return summary


def _verdict_value(key: str, value: object) -> bool:
    """True for the SLO verdict's keys that are not numbers (:func:`simkv.metrics.slo.verdict`):
    ``slo_*_pass`` (true/false) and ``slo_binding`` (an objective's name)."""
    if key.startswith("slo_") and key.endswith("_pass"):
        return isinstance(value, bool)
    names = [slo_name(k) for k, _, _ in SLO_KEYS]
    return key == "slo_binding" and value in names


def read_config(path: Path) -> tuple[str, dict[str, Any]]:
    """A resolved-config file: its text and mapping; :class:`InputError` naming it if damaged."""
    text = _read_text(path)
    try:
        config = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        raise InputError("damaged run file: not YAML", file=path) from None
    if not isinstance(config, dict):
        raise InputError("damaged run file: expected a YAML mapping", file=path)
    return text, config


def load_run(run_dir: Path) -> RunFolder:
    """Read a run folder; :class:`InputError` naming the file that is missing or damaged."""
    found = {name: frame_path(run_dir, name) for name in FRAME_NAMES}
    paths = {name: path for name, path in found.items() if path is not None}
    missing = [f"{name}.parquet" for name in FRAME_NAMES if name not in paths]
    missing += [name for name in RUN_FILES if not (run_dir / name).is_file()]
    if missing:
        raise InputError(f"not a simkv run folder: missing {', '.join(missing)}", file=run_dir)
    config_text, config = read_config(run_dir / "config.resolved.yaml")
    summary = _read_summary(run_dir / "summary.json")
    requests = read_table(paths["requests"], _REQUEST_COLUMNS)
    if requests.empty:
        raise InputError("damaged run file: no requests", file=paths["requests"])
    steps = read_table(paths["steps"], STEP_COLUMNS)
    itl = read_table(paths["itl"], _ITL_COLUMNS)
    replicas = _read_replicas(run_dir / REPLICAS_FILE) if config.get("fleet") else None
    tiers_path = frame_path(run_dir, "tiers")  # (a run with KV offload tiers)
    tiers = read_table(tiers_path, ("time_s", "tier", "blocks")) if tiers_path else None
    frames = RunFrames(requests, steps, itl, tiers=tiers)
    return RunFolder(run_dir, config_text, config, summary, frames, replicas)


REPLICAS_FILE = "replicas.json"
_REPLICA_COLUMNS = ("replica", "routed", "mean_outstanding")


def _read_replicas(path: Path) -> pd.DataFrame:
    """A fleet run's per-replica table: a JSON list of rows with :data:`_REPLICA_COLUMNS`."""
    try:
        rows = parse_json(_read_text(path), path)
    except InputError:
        raise InputError("damaged run file: not JSON", file=path) from None
    ok = isinstance(rows, list) and rows and all(isinstance(row, dict) for row in rows)
    table = pd.DataFrame(rows) if ok else pd.DataFrame()
    for column in _REPLICA_COLUMNS:
        values = pd.to_numeric(table.get(column), errors="coerce") if ok else None
        if values is None or not np.isfinite(values.to_numpy(np.float64)).all():
            raise InputError(f"damaged run file: {column} missing or not a number", file=path)
    return table


def run_folder_of(out: RunOutput, path: Path) -> RunFolder:
    """A run held in memory as :func:`load_run` would read it back from its folder ``path``
    (which need not exist): the same resolved config text, summary file and frames."""
    from simkv.run.simulate import file_summary  # the engine stack, only for a live run

    text = dump_resolved(out.config)
    return RunFolder(path, text, yaml.safe_load(text), file_summary(out), out.frames, out.replicas)
