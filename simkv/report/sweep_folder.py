"""A sweep folder read back for its report: name, axes, the table of runs and their SLOs.

Built from what :func:`simkv.sweep.run.run_sweep` leaves in the folder: ``sweep.json`` (name,
axes, run ids) and ``sweep.parquet`` (one row per run: ``run_id``, ``status``, ``error``, the
axis columns, the summary metrics). Each finished run's SLO is read from its
``runs/<run_id>/config.resolved.yaml`` into the columns ``slo_ttft_ms``, ``slo_tpot_ms`` and
``slo_e2el_ms`` (NaN where it sets none or its folder is gone; a damaged config is an
:class:`InputError` naming the file). Rows keep the sweep's order; a run's number in the report
is its row position + 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simkv.errors import InputError
from simkv.report.run_folder import read_config, read_table
from simkv.report.run_report import format_value
from simkv.report.sweep_summary import SLO_KEYS, slo_column
from simkv.text import read_json_file

STATUS_OK = "ok"
RUNS_DIR = "runs"
CONFIG_FILE = "config.resolved.yaml"


@dataclass(frozen=True)
class SweepFolder:
    """A sweep folder read back: name, axes in sweep order, and the table in run order
    (index 0..n-1, SLO columns added)."""

    path: Path
    name: str
    axes: tuple[str, ...]
    table: pd.DataFrame

    @property
    def ok(self) -> pd.DataFrame:
        """The rows of runs that finished (the only rows charts use)."""
        return self.table[self.table["status"] == STATUS_OK]


def run_number(index: Any) -> int:
    """The number a run is shown with (the ``#`` column): its row position + 1."""
    return int(index) + 1


def _slo_of(sweep_dir: Path, run_id: str) -> dict[str, float]:
    path = sweep_dir / RUNS_DIR / run_id / CONFIG_FILE
    if not path.is_file():
        return {}
    slo = read_config(path)[1].get("slo") or {}
    if not isinstance(slo, dict):
        raise InputError("damaged run file: slo is not a mapping", file=path)
    out = {}
    for key, _, _ in SLO_KEYS:
        value = slo.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InputError(f"damaged run file: slo.{key} is not a number", file=path)
        if value is not None:
            out[key] = float(value)
    return out


def _with_slos(sweep_dir: Path, table: pd.DataFrame) -> pd.DataFrame:
    """``table`` plus one ``slo_<key>`` column per SLO key, from the finished runs' configs."""
    slos = [
        _slo_of(sweep_dir, str(row.run_id)) if row.status == STATUS_OK else {}
        for row in table[["run_id", "status"]].itertuples()
    ]
    extra = {slo_column(key): [s.get(key, np.nan) for s in slos] for key, _, _ in SLO_KEYS}
    return table.assign(**{k: pd.Series(v, dtype="float64") for k, v in extra.items()})


def load_sweep_folder(sweep_dir: Path) -> SweepFolder:
    """Read ``sweep.json``, ``sweep.parquet`` and the runs' SLOs; :class:`InputError` if missing
    or inconsistent."""
    for name in ("sweep.json", "sweep.parquet"):
        if not (sweep_dir / name).is_file():
            raise InputError(f"not a simkv sweep folder: missing {name}", file=sweep_dir)
    try:
        meta = read_json_file(sweep_dir / "sweep.json")[0]
        name, axes = str(meta["name"]), tuple(str(axis) for axis in meta["axes"])
    except InputError as err:
        message = f"unreadable sweep.json: {err.message}"
        raise InputError(message, file=err.file, line=err.line) from None
    except (KeyError, TypeError) as err:
        raise InputError(f"unreadable sweep.json: {err}", file=sweep_dir / "sweep.json") from None
    table = read_table(sweep_dir / "sweep.parquet", ())
    missing = [c for c in ("run_id", "status", "error", *axes) if c not in table.columns]
    if missing:
        raise InputError(f"sweep.parquet lacks columns {', '.join(missing)}", file=sweep_dir)
    table = _with_slos(sweep_dir, table.reset_index(drop=True))
    return SweepFolder(sweep_dir, name, axes, table)


def py_value(value: Any) -> Any:
    """A table cell as a plain Python value; ``None`` for every kind of missing value."""
    if value is None or (np.ndim(value) == 0 and pd.isna(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def is_numeric_axis(column: pd.Series) -> bool:
    """Numbers (not booleans), so the axis is drawn to scale rather than as categories."""
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def x_axis(sweep: SweepFolder) -> str | None:
    """The axis charts put on x: the first numeric axis, else the first (categorical) one."""
    numeric = [axis for axis in sweep.axes if is_numeric_axis(sweep.table[axis])]
    return (numeric or list(sweep.axes) or [None])[0]


def levels(column: pd.Series) -> list[Any]:
    """Distinct values of an axis: sorted when numeric, else in order of first appearance."""
    values = list(dict.fromkeys(py_value(v) for v in column))
    return sorted(v for v in values if v is not None) if is_numeric_axis(column) else values


def axis_value(value: Any) -> str:
    """An axis value as the report shows it everywhere (``4.25``, ``1``, ``hash``, ``—``)."""
    return format_value(py_value(value))


def point_label(row: pd.Series, axes: tuple[str, ...] | list[str], keys: bool = True) -> str:
    """A run's axis values, ``axis=value, …`` (values only without ``keys``); else its id."""
    parts = [f"{axis}={axis_value(row[axis])}" if keys else axis_value(row[axis]) for axis in axes]
    return ", ".join(parts) or str(row["run_id"])
