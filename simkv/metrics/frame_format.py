"""The names and file formats of a run's frames, importable without pandas (CLI options)."""

from __future__ import annotations

from enum import StrEnum

FRAME_NAMES = ("requests", "steps", "itl")


class FrameFormat(StrEnum):
    """File format of a run's frames."""

    parquet = "parquet"
    csv = "csv"
