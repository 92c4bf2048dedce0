"""Running sweeps: run folders, failure isolation, resume, identical sweep.parquet everywhere."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from simkv.sweep.run import default_out_dir, run_sweep
from simkv.sweep.spec import load_sweep

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
RUN_FILES = {
    "DONE", "config.resolved.yaml", "itl.parquet", "point.json", "preemptions.parquet",
    "requests.parquet", "steps.parquet", "summary.json",
}  # fmt: skip
TOO_SMALL = (
    "kv_cache: the KV cache holds 64 tokens (4 blocks of 16), less than max_model_len 4096; "
    "give it more memory or lower model.max_model_len"
)


def write_sweep(tmp_path: Path, grid: str, limit: int = 60) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"name: tiny\nbase: {QUICKSTART}\noverrides: [workload.limit={limit}]\ngrid:\n{grid}"
    )
    return path


FOUR_RUNS = "  kv_cache.block_size: [16, 32]\n  scheduler.max_num_seqs: [4, 64]\n"


def test_runs_written_in_folders_and_rows_in_expansion_order(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    result = run_sweep(
        write_sweep(tmp_path, FOUR_RUNS), tmp_path / "out",
        progress=lambda done, total: calls.append((done, total)),
    )  # fmt: skip
    plan = result.plan
    assert calls == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert (result.ran, result.skipped, result.failed) == (4, 0, 0)
    table = pd.read_parquet(tmp_path / "out" / "sweep.parquet")
    assert list(table.columns[:5]) == [
        "run_id", "status", "error", "kv_cache.block_size", "scheduler.max_num_seqs",
    ]  # fmt: skip
    assert list(table.run_id) == [run.run_id for run in plan.runs]
    assert list(table["kv_cache.block_size"]) == [16, 16, 32, 32]
    assert list(table["scheduler.max_num_seqs"]) == [4, 64, 4, 64]
    assert set(table.status) == {"ok"}
    assert table.error.isna().all()
    assert list(table.num_requests) == [60] * 4
    assert "wall_s" not in table.columns
    for run in plan.runs:
        run_dir = tmp_path / "out" / "runs" / run.run_id
        assert {p.name for p in run_dir.iterdir()} == RUN_FILES
        assert json.loads((run_dir / "point.json").read_text()) == run.point
        assert (run_dir / "config.resolved.yaml").read_text() == run.config_yaml
        assert (run_dir / "DONE").read_text() == run.digest + "\n"
    timings = json.loads((tmp_path / "out" / "timings.json").read_text())
    assert list(timings["runs"]) == [run.run_id for run in plan.runs]
    meta = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert meta["axes"] == ["kv_cache.block_size", "scheduler.max_num_seqs"]


def test_a_failing_run_is_recorded_and_the_others_finish(tmp_path: Path) -> None:
    # 4 blocks of 16 tokens cannot hold one max_model_len request: the run raises at start
    result = run_sweep(write_sweep(tmp_path, "  kv_cache.num_blocks: [4, 20000]\n"), tmp_path)
    assert (result.ran, result.failed) == (2, 1)
    table = pd.read_parquet(tmp_path / "sweep.parquet")
    assert list(table.status) == ["failed", "ok"]
    assert table.error[0] == TOO_SMALL
    assert pd.isna(table.error[1])
    assert pd.isna(table.mean_ttft_ms[0]) and table.mean_ttft_ms[1] > 0
    assert pd.isna(table.num_requests[0]) and table.num_requests[1] == 60
    failed_dir = tmp_path / "runs" / table.run_id[0]
    assert {p.name for p in failed_dir.iterdir()} == {"point.json", "error.txt"}
    text = (failed_dir / "error.txt").read_text()
    assert text.startswith(TOO_SMALL + "\n\nTraceback")


def test_resume_reruns_only_incomplete_runs(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path, FOUR_RUNS)
    first = run_sweep(sweep, tmp_path / "out")
    before = (tmp_path / "out" / "sweep.parquet").read_bytes()
    ids = [run.run_id for run in first.plan.runs]
    runs = tmp_path / "out" / "runs"
    stamps = {i: os.stat(runs / i / "DONE").st_mtime_ns for i in ids}
    (runs / ids[1] / "DONE").unlink()  # interrupted while writing
    shutil.rmtree(runs / ids[2])  # never started
    (runs / ids[3] / "DONE").write_text("0" * 64 + "\n")  # done for another config
    calls: list[tuple[int, int]] = []
    second = run_sweep(
        sweep, tmp_path / "out", resume=True,
        progress=lambda done, total: calls.append((done, total)),
    )  # fmt: skip
    assert (second.ran, second.skipped) == (3, 1)
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert os.stat(runs / ids[0] / "DONE").st_mtime_ns == stamps[ids[0]]
    assert all((runs / i / "DONE").read_text() != "0" * 64 + "\n" for i in ids)
    assert (tmp_path / "out" / "sweep.parquet").read_bytes() == before
    third = run_sweep(sweep, tmp_path / "out", resume=True)
    assert (third.ran, third.skipped) == (0, 4)
    assert (tmp_path / "out" / "sweep.parquet").read_bytes() == before
    timings = json.loads((tmp_path / "out" / "timings.json").read_text())
    assert list(timings["runs"]) == ids  # earlier timings survive a resume


def test_resume_retries_failed_runs_and_without_resume_everything_reruns(tmp_path: Path) -> None:
    sweep = write_sweep(tmp_path, "  kv_cache.num_blocks: [4, 20000]\n")
    run_sweep(sweep, tmp_path)
    resumed = run_sweep(sweep, tmp_path, resume=True)
    assert (resumed.ran, resumed.skipped, resumed.failed) == (1, 1, 1)
    again = run_sweep(sweep, tmp_path)
    assert (again.ran, again.skipped, again.failed) == (2, 0, 1)


def test_default_out_dir_is_reports_slash_name(tmp_path: Path) -> None:
    plan = load_sweep(write_sweep(tmp_path, FOUR_RUNS))
    assert default_out_dir(plan) == Path("reports") / "tiny"


def _same_sweep_files(a: Path, b: Path) -> None:
    assert_frame_equal(pd.read_parquet(a / "sweep.parquet"), pd.read_parquet(b / "sweep.parquet"))
    assert (a / "sweep.parquet").read_bytes() == (b / "sweep.parquet").read_bytes()


def test_process_pool_writes_the_same_sweep_parquet_as_serial(tmp_path: Path) -> None:
    grid = FOUR_RUNS + "  kv_cache.num_blocks: [4, 20000]\n"  # failures must match too
    sweep = write_sweep(tmp_path, grid, limit=40)
    serial = run_sweep(sweep, tmp_path / "serial")
    pooled = run_sweep(sweep, tmp_path / "process", executor="process", jobs=2)
    assert (serial.failed, pooled.failed) == (4, 4)
    _same_sweep_files(tmp_path / "serial", tmp_path / "process")


def test_ray_writes_the_same_sweep_parquet_as_serial(tmp_path: Path) -> None:
    if importlib.util.find_spec("ray") is None:
        if os.environ.get("SIMKV_REQUIRE_RAY") == "1":
            pytest.fail("SIMKV_REQUIRE_RAY=1 but ray is not installed")
        pytest.skip("ray is not installed (pip install -e '.[ray]'); SIMKV_REQUIRE_RAY=1 fails")
    sweep = write_sweep(tmp_path, "  kv_cache.num_blocks: [4, 20000]\n", limit=40)
    run_sweep(sweep, tmp_path / "serial")
    result = run_sweep(sweep, tmp_path / "ray", executor="ray", jobs=2)
    assert (result.ran, result.failed) == (2, 1)
    _same_sweep_files(tmp_path / "serial", tmp_path / "ray")


def test_a_fleet_sweeps_like_one_engine(tmp_path: Path) -> None:
    """A fleet config is a normal run: a sweep over its router runs, writes the per-replica
    table beside the frames and resumes."""
    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"name: fleet\nbase: {QUICKSTART}\noverrides:\n  - workload.limit=60\n"
        "  - 'fleet={replicas: [{count: 2}]}'\n"
        "grid:\n  fleet.router.kind: [round_robin, least_outstanding]\n"
    )
    result = run_sweep(path, tmp_path / "out")
    assert (result.ran, result.failed) == (2, 0)
    table = pd.read_parquet(tmp_path / "out" / "sweep.parquet")
    assert list(table["fleet.router.kind"]) == ["round_robin", "least_outstanding"]
    assert list(table.num_replicas) == [2, 2] and list(table.num_requests) == [60, 60]
    for run in result.plan.runs:
        names = {p.name for p in (tmp_path / "out" / "runs" / run.run_id).iterdir()}
        assert names == RUN_FILES | {"replicas.json"}
    again = run_sweep(path, tmp_path / "out", resume=True)
    assert (again.ran, again.skipped) == (0, 2)
