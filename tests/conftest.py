"""Shared test constants and the tiny CLI config fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TINY = """\
name: tiny-cli
workload:
  kind: trace
  path: trace.csv
  format: generic
  columns: {arrival_s: arrival_s}
model: {preset: llama-2-7b, max_model_len: 64}
gpu: a100-80gb
kv_cache: {block_size: 4, num_blocks: 40}
scheduler: {kind: vllm_v1}
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "trace.csv").write_text(
        "arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.01,20,3\n0.02,7,9\n"
    )
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY)
    return config
