"""The ``kind: measured`` workload: replay a measurement of a real serving engine."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, PositiveInt

from simkv.config.base import Frozen


class MeasuredWorkload(Frozen):
    """The requests of a measured run (:func:`simkv.measured.read_measured_run`), replayed.

    They arrive at the measured times with the measured prompt and output lengths; with
    ``content`` and prompt token ids in the measurement, prefix sharing between prompts is
    exact. With ``engine_settings``, :func:`simkv.run.load.load_config` fills the measured
    engine's settings (:func:`simkv.measured.engine_overrides`) into the keys the config leaves
    unset, so the resolved config shows them.
    """

    kind: Literal["measured"]
    path: Path = Field(
        description="run folder (requests.jsonl + meta.json), vllm bench serve JSON or generic "
        "CSV; relative to the config file's directory"
    )
    limit: PositiveInt | None = Field(None, description="keep the first N requests (arrival order)")
    content: bool = Field(
        True, description="exact prompt content from the measurement's prompt token ids, if any"
    )
    engine_settings: bool = Field(
        True, description="fill the measured engine's settings into keys the config leaves unset"
    )
