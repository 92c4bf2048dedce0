"""The names and file formats of a run's frames, importable without pandas (CLI options)."""

from __future__ import annotations

from enum import StrEnum

FRAME_NAMES = ("requests", "steps", "itl")
OPTIONAL_FRAMES = ("preemptions", "tiers")
"""Frames a run folder may lack (read back as None): ``preemptions`` (an older simkv did not
write it), ``tiers`` (only a run with KV offload tiers has it: :mod:`simkv.metrics.tiers`)."""


class FrameFormat(StrEnum):
    """File format of a run's frames."""

    parquet = "parquet"
    csv = "csv"
