"""The capacity CLI tests' config (a small synthetic workload with a TTFT SLO), written into
each test's folder with the GPU options file, and the installed entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = """\
name: cap
seed: 1
workload:
  kind: synthetic
  num_requests: 150
  arrival: {kind: poisson, rate: 1.0}
  prompt_tokens: {kind: fixed, value: 400}
  output_tokens: {kind: fixed, value: 40}
model: llama-2-7b
gpu: a100-80gb
scheduler: {kind: vllm_v1}
slo: {ttft_ms: 200}
"""
OPTIONS = """\
options:
  - {name: a100-tp1, price_per_gpu_hour: 2.0, set: [gpu=a100-80gb]}
  - {name: h100-tp1, price_per_gpu_hour: 3.5, set: [gpu=h100-80gb]}
  - {name: a100-tp2, price_per_gpu_hour: 2.0, set: [gpu=a100-80gb, parallel.tensor_parallel=2]}
"""
SIMKV = str(Path(sys.executable).parent / "simkv")


def run_capacity(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``simkv capacity ARGS`` through the installed entry point, in ``cwd``."""
    return subprocess.run([SIMKV, "capacity", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """``cap.yaml`` (:data:`CONFIG`) and ``options.yaml`` (:data:`OPTIONS`) in ``tmp_path``."""
    path = tmp_path / "cap.yaml"
    path.write_text(CONFIG)
    (tmp_path / "options.yaml").write_text(OPTIONS)
    return path
