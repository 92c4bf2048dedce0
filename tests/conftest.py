"""Shared test constants, the tiny CLI config fixture, the bundled measured runs and the
benchmark-script loader."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from simkv.measured import MeasuredRun, read_measured_run
from tests.measured.conftest import QWEN3_32B, RTX4090, RTXPRO6000

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


def load_benchmark(name: str) -> ModuleType:
    """benchmarks/<name>.py as a module, its folder on the path as when it runs as a script."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.append(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        f"simkv_{name}_bench", ROOT / "benchmarks" / f"{name}.py"
    )
    if spec is None or spec.loader is None:
        raise ImportError(name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "trace.csv").write_text(
        "arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.01,20,3\n0.02,7,9\n"
    )
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY)
    return config


@pytest.fixture(scope="session")
def rtx4090() -> MeasuredRun:
    return read_measured_run(RTX4090)


@pytest.fixture(scope="session")
def rtxpro6000() -> MeasuredRun:
    return read_measured_run(RTXPRO6000)


@pytest.fixture(scope="session")
def qwen3_32b() -> MeasuredRun:
    return read_measured_run(QWEN3_32B)
