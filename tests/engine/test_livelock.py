"""No run livelocks: what-if victim policies hold a preempted request back (vllm_v1), and the
engine ends a run that keeps preempting without progress with one clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from simkv.cli import app
from simkv.config.sim import SimConfig
from simkv.engine.progress import SimulationStalled
from simkv.engine.schedulers.vllm_v1 import VllmV1Scheduler
from tests.engine.helpers import build_engine

runner = CliRunner()


def livelock_config(victim: str, seed: int = 17, n: int = 3) -> dict[str, Any]:
    """Chunked prefill in 32-token pieces, memory for about one request: under ``oldest`` or
    ``longest`` without the hold, requests took turns recomputing forever."""
    return {
        "name": "livelock", "seed": seed,
        "workload": {
            "kind": "synthetic", "num_requests": n, "arrival": {"kind": "poisson", "rate": 1.0},
            "prompt_tokens": {"kind": "uniform", "low": 233, "high": 464},
            "output_tokens": {"kind": "uniform", "low": 1, "high": 48},
        },
        "model": {"preset": "llama-2-7b", "max_model_len": 512},
        "gpu": "a100-80gb",
        "kv_cache": {"block_size": 16, "num_blocks": 32, "prefix_caching": "none"},
        "scheduler": {"kind": "vllm_v1", "long_prefill_token_threshold": 32},
        "preemption": {"victim": victim},
    }  # fmt: skip


LIVELOCKS = [livelock_config("longest"), livelock_config("oldest", seed=44, n=10)]


@pytest.mark.parametrize("data", LIVELOCKS, ids=["longest", "oldest"])
def test_what_if_victims_finish_every_request(data: dict[str, Any], tmp_path: Path) -> None:
    config = tmp_path / "livelock.yaml"
    config.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["run", str(config), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["completed"] == data["workload"]["num_requests"]


@pytest.mark.parametrize("data", LIVELOCKS, ids=["longest", "oldest"])
def test_engine_ends_a_livelock_with_the_setting_to_change(
    data: dict[str, Any], tmp_path: Path
) -> None:
    """Without the hold (the policy as it was), the progress guarantee ends the run."""
    engine, _ = build_engine(SimConfig.model_validate(data), tmp_path)
    engine.scheduler._held = None  # type: ignore[attr-defined]
    with pytest.raises(SimulationStalled, match=r"livelock at t=.*preemption\.victim"):
        engine.run()
    assert engine.recorder.num_done < data["workload"]["num_requests"]


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    return config


def test_a_run_time_stall_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stall found at run time is one line naming the time, the queues and the setting,
    exit 1, no traceback. No vllm_v1 config reaches it any more (a budget below
    max_model_len with chunked prefill off is refused at start-up, as vLLM refuses it), so
    the scheduler is made to admit nothing."""
    monkeypatch.setattr(VllmV1Scheduler, "_admit", lambda *args: None)
    data = livelock_config("newest", seed=1, n=3)
    result = runner.invoke(app, ["run", str(_write(tmp_path, data)), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert "stalled at t=" in lines[0] and "waiting, 0 running" in lines[0]
    assert "max_num_batched_tokens" in lines[0]


@pytest.mark.parametrize(
    ("scheduler", "key", "line"),
    [
        ({"kind": "orca", "max_num_batched_tokens": 100}, "scheduler.max_num_batched_tokens", 27),
    ],
)  # fmt: skip
def test_a_config_that_can_only_stall_is_an_input_error(
    scheduler: dict[str, Any], key: str, line: int, tmp_path: Path
) -> None:
    """(vllm_v1's such configs are refused by validation as vLLM refuses them:
    tests/engine/test_vllm_conformance.py.)"""
    data = livelock_config("newest")
    data["scheduler"] = scheduler
    data.pop("preemption")
    config = _write(tmp_path, data)
    result = runner.invoke(app, ["run", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [result.output.strip()]
    assert f"{config}:{line} {key}: " in result.output
    assert "can never be scheduled whole" in result.output
    over = runner.invoke(app, ["run", str(config), "--set", f"{key}=50"])
    assert over.exit_code == 2 and f"--set {key}: " in over.output
