"""The checked inputs of a run (:func:`simkv.run.check_inputs`): every replica group of a fleet
gets the start-up checks a single engine gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from simkv.cli import app
from simkv.config.sim import SimConfig
from simkv.errors import InputError
from simkv.run import check_inputs
from tests.engine.helpers import tiny_data

# 130 blocks of 16 hold 2,080 tokens, max_model_len; vLLM V1's null block leaves 129 for
# requests, and a request of 2,080 tokens needs 130 (its last sampled token is never written)
SMALL_POOL = {"block_size": 16, "num_blocks": 130}
LONG = [(0.0, 2000, 80), (0.1, 2000, 80)]


def _document(tmp_path: Path, groups: list[dict[str, Any]]) -> dict[str, Any]:
    data = tiny_data(tmp_path, LONG, {"kind": "vllm_v1"}, num_blocks=1000, block_size=16,
                     max_model_len=2080)  # fmt: skip
    if groups:
        data["fleet"] = {"router": {"kind": "round_robin"}, "replicas": groups}
    return data


def _config(data: dict[str, Any]) -> SimConfig:
    return SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))


def test_a_single_engine_refuses_a_pool_its_longest_request_outgrows(tmp_path: Path) -> None:
    data = _document(tmp_path, [])
    data["kv_cache"] = SMALL_POOL
    with pytest.raises(InputError, match="a request of 2080 tokens needs 130") as err:
        check_inputs(_config(data), tmp_path)
    assert err.value.field == "kv_cache"


def test_every_fleet_group_gets_the_longest_request_check(tmp_path: Path) -> None:
    """The same pool as the second group of a fleet is refused at start-up, at the group's key
    (it once passed the checks, which only the first group got, and stalled at run time)."""
    data = _document(tmp_path, [{"count": 1}, {"count": 1, "kv_cache": SMALL_POOL}])
    with pytest.raises(InputError) as err:
        check_inputs(_config(data), tmp_path)
    lines = err.value.lines()
    assert len(lines) == 1
    assert lines[0].startswith("fleet.replicas.1.kv_cache: replica group 1: 130 blocks")
    assert "a request of 2080 tokens needs 130" in lines[0]


def test_the_fleet_check_reaches_the_user_as_one_located_line(tmp_path: Path) -> None:
    data = _document(tmp_path, [{"count": 1}, {"count": 1, "kv_cache": SMALL_POOL}])
    config = tmp_path / "fleet.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    line = f"error: {config}:"
    assert line in result.output
    assert "fleet.replicas.1.kv_cache: replica group 1:" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out" / "summary.json").exists()


def test_every_group_is_checked_and_named(tmp_path: Path) -> None:
    """Two groups with a bad pool each: both errors at once, each naming its group."""
    data = _document(tmp_path, [{"count": 1, "kv_cache": SMALL_POOL},
                                {"count": 2, "kv_cache": SMALL_POOL}])  # fmt: skip
    with pytest.raises(InputError) as err:
        check_inputs(_config(data), tmp_path)
    lines = err.value.lines()
    assert [line.split(":")[0] for line in lines] == [
        "fleet.replicas.0.kv_cache", "fleet.replicas.1.kv_cache",
    ]  # fmt: skip
