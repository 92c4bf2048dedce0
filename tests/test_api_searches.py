"""`simkv.sweep`, `simkv.capacity` and `simkv.compare`: the commands' results as objects,
written to disk only with ``out`` (and then as the commands write them)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import simkv
from simkv.errors import InputError
from tests.conftest import ROOT
from tests.test_cli_compare import CONFIG, MEASURED

QUICKSTART = ROOT / "configs" / "quickstart.yaml"
SWEEP = {
    "name": "tiny",
    "base": "quickstart.yaml",
    "overrides": ["workload.limit=150"],
    "grid": {"kv_cache.block_size": [16, 32]},
}


def test_a_sweep_mapping_runs_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    done = simkv.sweep(SWEEP, base_dir=QUICKSTART.parent)
    assert list(tmp_path.iterdir()) == [] and done.out_dir is None
    assert done.name == "tiny" and done.axes == ("kv_cache.block_size",) and done.failed == 0
    assert list(done.table["kv_cache.block_size"]) == [16, 32]
    assert (done.table["status"] == "ok").all() and done.table["p99_ttft_ms"].notna().all()
    assert any(line.startswith("Runs meeting the SLOs") for line in done.summary)
    with pytest.raises(InputError, match=r"^grid\.kv_cache\.block_size"):
        simkv.sweep({**SWEEP, "grid": {"kv_cache.block_size": [16, None]}}, base_dir=ROOT)


def test_a_sweep_with_out_is_the_folder_simkv_sweep_writes(tmp_path: Path) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(f"name: tiny\nbase: {QUICKSTART}\noverrides: [workload.limit=150]\n"
                    "grid: {kv_cache.block_size: [16, 32]}\n")  # fmt: skip
    done = simkv.sweep(spec, tmp_path / "out")
    assert done.out_dir == tmp_path / "out"
    assert (done.out_dir / "report.html").is_file()
    pd.testing.assert_frame_equal(pd.read_parquet(done.out_dir / "sweep.parquet"), done.table)
    assert sorted(p.name for p in (done.out_dir / "runs").iterdir()) == sorted(done.table["run_id"])


def test_capacity_returns_the_answer_and_writes_only_with_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    found = simkv.capacity(QUICKSTART, rate_min=1, rate_max=16, tolerance=0.5,
                           workload__limit=150)  # fmt: skip
    assert list(tmp_path.iterdir()) == [] and found.out_dir is None
    assert found.answer["search"] == "rate" and found.answer["outcome"] == "found"
    rate = found.answer["answer_rate"]
    assert found.summary[0].startswith(f"Capacity: the highest workload.rate meeting the SLOs "
                                       f"is {rate:g} req/s")  # fmt: skip
    assert sorted(found.table["workload.rate"]) == sorted(j["rate"] for j in found.answer["judged"])
    kept = simkv.capacity(QUICKSTART, "out", rate_min=1, rate_max=16, tolerance=0.5,
                          workload__limit=150)  # fmt: skip
    assert kept.answer == found.answer and (tmp_path / "out" / "report.html").is_file()
    with pytest.raises(InputError, match=r"^min_good: expected a share"):
        simkv.capacity(QUICKSTART, min_good=1.5)


def test_replicas_at_a_rate(tmp_path: Path) -> None:
    found = simkv.capacity(QUICKSTART, at_rate=2.0, count_max=2, workload__limit=100)
    assert found.answer["search"] == "replicas" and found.answer["answer_replicas"] == 1
    assert found.summary[0].startswith("Replicas:")


def test_replicas_against_target_rate_with_options(tmp_path: Path) -> None:
    """A list of rates is the curve ``--at-rate 2,4 --options`` writes, in the same folder."""
    options = ROOT / "configs" / "capacity" / "gpu_options.yaml"
    found = simkv.capacity(QUICKSTART, tmp_path / "curve", at_rate=[4.0, 2.0], count_max=2,
                           options=options, workload__limit=60)  # fmt: skip
    assert found.answer["search"] == "curve" and found.answer["rates"] == [2.0, 4.0]
    assert sorted(set(found.table["at_rate"])) == [2.0, 4.0]
    assert set(found.table["option"]) == {"a100-tp1", "a100-tp2", "h100-tp1"}
    assert (tmp_path / "curve" / "options.html").is_file()
    assert (tmp_path / "curve" / "at-2" / "options.html").is_file()


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(config, measured CSV) of the compare tests' tiny measurement."""
    root = tmp_path_factory.mktemp("replay")
    (root / "measured.csv").write_text(MEASURED)
    (root / "replay.yaml").write_text(CONFIG)
    return root / "replay.yaml", root / "measured.csv"


def test_compare_a_run_in_memory_as_its_folder(
    replay: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config, measured = replay
    run = simkv.simulate(config)
    in_memory = simkv.compare(run, measured=measured)
    assert list(tmp_path.iterdir()) == [] and in_memory.written == ()
    assert in_memory.headline.startswith("Mean abs. Diff%") and "(12 of 12)" in in_memory.headline
    assert list(in_memory.table.columns) == ["metric", "measured", "simulated", "diff_pct"]
    assert in_memory.saturation is not None and not in_memory.saturation.measured.overloaded
    run.report("run")
    from_folder = simkv.compare("run", measured=measured, out="cmp")
    pd.testing.assert_frame_equal(from_folder.table, in_memory.table)
    assert from_folder.written == (Path("cmp/compare.html"), Path("cmp/compare.csv"))
    assert pd.read_csv("cmp/compare.csv")["metric"].tolist() == in_memory.table["metric"].tolist()
    memory, folder = in_memory.detail.run, from_folder.detail.run  # the same run either way
    assert (memory.config_text, memory.config) == (folder.config_text, folder.config)
    assert memory.summary == folder.summary and memory.name == folder.name
