"""A run's frames on disk: ``requests``, ``steps`` and ``itl`` as Parquet or CSV files.

One file per frame, ``<name>.parquet`` or ``<name>.csv``, in the run folder. Readers take
whichever is there (Parquet first), so a report can be rebuilt from either format. CSV keeps
the columns and their order; empty values (a request never scheduled) read back as NaN.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import pandas as pd

from simkv.errors import InputError
from simkv.metrics.recorder import RunFrames

FRAME_NAMES = ("requests", "steps", "itl")


class FrameFormat(StrEnum):
    """File format of a run's frames."""

    parquet = "parquet"
    csv = "csv"


def write_frames(frames: RunFrames, out_dir: Path, fmt: FrameFormat) -> list[Path]:
    """Write the three frames into ``out_dir`` as ``<name>.<fmt>``; returns the paths."""
    paths = []
    for name in FRAME_NAMES:
        path = out_dir / f"{name}.{fmt.value}"
        frame: pd.DataFrame = getattr(frames, name)
        with path.open("wb") as handle:  # a handle: pyarrow reads a path like ab:12/x as a URI
            if fmt is FrameFormat.parquet:
                frame.to_parquet(handle, index=False)
            else:
                frame.to_csv(handle, index=False)
        paths.append(path)
    return paths


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


def read_frames(run_dir: Path) -> RunFrames:
    """The frames of a run folder, from Parquet or CSV; :class:`InputError` if one is missing."""
    tables = []
    for name in FRAME_NAMES:
        path = frame_path(run_dir, name)
        if path is None:
            message = f"not a simkv run folder: missing {name}.parquet or .csv"
            raise InputError(message, file=run_dir)
        tables.append(read_frame(path))
    return RunFrames(*tables)
