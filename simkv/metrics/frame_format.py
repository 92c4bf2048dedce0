"""The names and file formats of a run's frames, importable without pandas (CLI options)."""

from __future__ import annotations

from enum import StrEnum

FRAME_NAMES = ("requests", "steps", "itl")
OPTIONAL_FRAMES = ("preemptions",)
"""Frames a run writes that a run folder of an older simkv lacks (read back as None)."""


class FrameFormat(StrEnum):
    """File format of a run's frames."""

    parquet = "parquet"
    csv = "csv"
