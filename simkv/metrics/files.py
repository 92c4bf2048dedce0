"""A run's frames on disk: ``requests``, ``steps``, ``itl``, ``preemptions`` and ``tiers`` as
Parquet or CSV files.

One file per frame, ``<name>.parquet`` or ``<name>.csv``, in the run folder; the
:data:`OPTIONAL_FRAMES` (``preemptions``, ``tiers``) may be missing from a folder.
Readers take whichever is there (Parquet first), so a report can be rebuilt from either format.
CSV keeps the columns and their order; empty values (a request never scheduled) read back as
NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO

import numpy as np
import pandas as pd

from simkv.errors import InputError
from simkv.metrics.frame_format import FRAME_NAMES, OPTIONAL_FRAMES, FrameFormat
from simkv.metrics.recorder import RunFrames
from simkv.outputs import write_file

__all__ = [
    "FRAME_NAMES", "OPTIONAL_FRAMES", "FrameFormat", "frame_path", "missing_frames",
    "read_frame", "read_frames", "read_table", "write_frames",
]  # fmt: skip


def _writer(frame: pd.DataFrame, fmt: FrameFormat) -> Callable[[BinaryIO], None]:
    """What writes ``frame`` as ``fmt`` to an open binary file (a handle, never a path:
    pyarrow reads a path like ab:12/x as a URI)."""
    if fmt is FrameFormat.parquet:
        return lambda handle: frame.to_parquet(handle, index=False)
    return lambda handle: frame.to_csv(handle, index=False)


def write_frames(frames: RunFrames, out_dir: Path, fmt: FrameFormat) -> list[Path]:
    """Write the frames into ``out_dir`` as ``<name>.<fmt>`` (an optional frame only when
    recorded), each atomically; returns the paths."""
    return [
        write_file(out_dir / f"{name}.{fmt.value}", _writer(getattr(frames, name), fmt))
        for name in (*FRAME_NAMES, *OPTIONAL_FRAMES)
        if getattr(frames, name) is not None
    ]


def read_frame(path: Path) -> pd.DataFrame:
    """One frame file, Parquet or CSV by its suffix, read through a file handle."""
    with path.open("rb") as handle:
        return pd.read_parquet(handle) if path.suffix == ".parquet" else pd.read_csv(handle)


def frame_path(run_dir: Path, name: str) -> Path | None:
    """The file holding frame ``name`` in ``run_dir`` (Parquet preferred), or None."""
    for fmt in FrameFormat:
        path = run_dir / f"{name}.{fmt.value}"
        if path.is_file():
            return path
    return None


def missing_frames(run_dir: Path) -> list[str]:
    """The frame files ``run_dir`` lacks, named by their Parquet file (``requests.parquet``)."""
    return [f"{name}.parquet" for name in FRAME_NAMES if frame_path(run_dir, name) is None]


def _numbers(table: pd.DataFrame, name: str, allow_nan: bool) -> bool:
    """Whether column ``name`` holds only finite numbers (NaN too if ``allow_nan``)."""
    column = table[name]
    if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return False
    values = column.to_numpy(np.float64, na_value=np.nan)
    return bool(np.all(np.isfinite(values) | (allow_nan & np.isnan(values))))


def read_table(
    path: Path,
    columns: Sequence[str] = (),
    *,
    finite: Sequence[str] = (),
    numeric: Sequence[str] = (),
) -> pd.DataFrame:
    """A frame file (Parquet or CSV) with at least ``columns``, finite numbers in every row of
    ``finite`` and finite numbers or NaN in ``numeric``; anything else (unreadable bytes, a
    missing column, text or infinity where a number belongs) is an :class:`InputError` naming
    the file."""
    try:
        table = read_frame(path)
    except Exception as err:  # pyarrow and pandas raise several unrelated types for damage
        message = f"not a readable {path.suffix.lstrip('.')} table ({type(err).__name__})"
        raise InputError(message, file=path) from None
    needed = dict.fromkeys((*columns, *finite, *numeric))
    missing = [name for name in needed if name not in table.columns]
    if missing:
        raise InputError(f"damaged run file: missing columns {', '.join(missing)}", file=path)
    for names, allow_nan in ((finite, False), (numeric, True)):
        bad = [name for name in names if not _numbers(table, name, allow_nan)]
        if bad:
            raise InputError(f"damaged run file: {bad[0]} is not a finite number", file=path)
    return table


def read_frames(
    run_dir: Path,
    columns: Mapping[str, Sequence[str]] = MappingProxyType({}),
    *,
    finite: Mapping[str, Sequence[str]] = MappingProxyType({}),
    numeric: Mapping[str, Sequence[str]] = MappingProxyType({}),
) -> RunFrames:
    """The frames of a run folder, from Parquet or CSV, each checked by :func:`read_table`
    (the mappings go from frame name to its columns); :class:`InputError` naming the folder
    or the file that is missing or damaged. A missing optional frame is None."""
    tables: dict[str, pd.DataFrame | None] = {}
    for name in (*FRAME_NAMES, *OPTIONAL_FRAMES):
        path = frame_path(run_dir, name)
        if path is None and name in OPTIONAL_FRAMES:
            tables[name] = None
            continue
        if path is None:
            message = f"not a simkv run folder: missing {name}.parquet or .csv"
            raise InputError(message, file=run_dir)
        checks = {"finite": finite.get(name, ()), "numeric": numeric.get(name, ())}
        tables[name] = read_table(path, columns.get(name, ()), **checks)
    return RunFrames(**tables)  # type: ignore[arg-type]
