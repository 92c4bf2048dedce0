"""A run served by several data-parallel engines is read (and can be compared against) but not
replayed: every replay route refuses it with one line at the field that records it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from simkv.cli import app
from simkv.measured import check_single_engine, read_engine_settings, read_measured_run
from tests.measured.conftest import make_run, request

runner = CliRunner()
META = {"engine_kwargs": {"max_num_seqs": 8, "tensor_parallel_size": 1,
                          "data_parallel_size": 2, "enable_expert_parallel": True}}  # fmt: skip


@pytest.fixture
def dp_run(tmp_path: Path) -> Path:
    return make_run(tmp_path / "dp", [request(0, 10.0), request(1, 10.5)], META)


def test_the_settings_record_data_and_expert_parallelism(dp_run: Path) -> None:
    settings = read_engine_settings(dp_run)
    assert (settings.data_parallel, settings.expert_parallel) == (2, True)
    assert len(read_measured_run(dp_run).requests) == 2  # reading it is fine


def test_one_engine_passes(dp_run: Path) -> None:
    settings = read_engine_settings(dp_run)
    check_single_engine(dp_run, None)
    check_single_engine(dp_run, type(settings)(data_parallel=1))


@pytest.mark.parametrize("route", ["run", "calibrate"])
def test_every_replay_route_refuses_it(dp_run: Path, tmp_path: Path, route: str) -> None:
    if route == "run":
        config = tmp_path / "replay.yaml"
        config.write_text("name: dp\nworkload: {kind: measured, path: dp}\n"
                          "model: {preset: llama-3.1-8b}\ngpu: rtx-pro-6000\n")  # fmt: skip
        args = ["run", str(config), "--out", str(tmp_path / "out")]
    else:
        args = ["calibrate", str(dp_run), "--model", "llama-3.1-8b", "--gpu", "rtx-pro-6000"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: {dp_run / 'meta.json'}:5 engine_kwargs.data_parallel_size: the run was served "
        "by 2 data-parallel engines, with expert parallelism; simkv replays a single engine "
        "and models neither data nor expert parallelism"
    )
    assert not (tmp_path / "out").exists()


def test_its_requests_still_load_an_engine_the_config_describes(
    dp_run: Path, tmp_path: Path
) -> None:
    config = tmp_path / "load.yaml"
    config.write_text("name: dp\nworkload: {kind: measured, path: dp, engine_settings: false}\n"
                      "model: {preset: llama-3.1-8b}\ngpu: rtx-pro-6000\n")  # fmt: skip
    result = runner.invoke(app, ["run", str(config), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "requests.parquet").is_file()
