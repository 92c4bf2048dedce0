"""measured_workload and the kind: measured workload built from a config."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import TypeAdapter

from simkv.config.workload import WorkloadConfig
from simkv.errors import InputError
from simkv.workload.build import build_workload
from simkv.workload.replay import measured_workload
from tests.measured.conftest import MEASURED, RTX4090


def test_measured_arrivals_and_lengths(rtx4090):
    w = measured_workload(rtx4090)
    req = rtx4090.requests
    assert len(w) == 300 and w.source == "measured RTX4090_Llama-3.1-8B: 300 requests"
    assert np.array_equal(w.arrival_s, req["arrival_s"].to_numpy())
    assert np.array_equal(w.prompt_tokens, req["prompt_tokens"].to_numpy())
    assert np.array_equal(w.output_tokens, req["output_tokens"].to_numpy())
    assert not w.priority.any()
    assert w.content is not None
    assert w.content.prompt_tokens().tolist() == req["prompt_tokens"].tolist()


def test_limit_and_content_off(rtx4090):
    w = measured_workload(rtx4090, limit=25, content=False)
    assert len(w) == 25 and w.content is None and w.source.endswith("first 25")
    assert len(measured_workload(rtx4090, limit=25).content) == 25


def build(data: dict, base_dir: Path):
    cfg = TypeAdapter(WorkloadConfig).validate_python(data)
    return build_workload(cfg, np.random.default_rng(0), base_dir)


def test_built_from_a_config_with_a_relative_path(rtx4090):
    w = build({"kind": "measured", "path": f"llmservingsim-vllm0.19/{RTX4090.name}", "limit": 10},
              MEASURED)  # fmt: skip
    assert len(w) == 10 and w.content is not None
    assert w.prompt_tokens.tolist() == rtx4090.requests["prompt_tokens"].iloc[:10].tolist()


def test_bad_measurement_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        build({"kind": "measured", "path": "missing.csv"}, tmp_path)
