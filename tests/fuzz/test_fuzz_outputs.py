"""Hostile outputs, damaged run folders and sweep files through the real CLI, and the
installed entry point: exit 0 or 2 with located ``error:`` lines only, nothing written lost.
(Run-time sweep faults — a worker killed, the parent killed, Ctrl-C, time limits, damaged run
folders on ``--resume`` — are in ``tests/sweep/test_faults.py``.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from simkv.cli import app
from tests.fuzz.hostile import CONFIG, TRACE, assert_clean, folder, runner, snapshot, tried
from tests.fuzz.test_fuzz_inputs import HOSTILE_CONFIGS


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    here = tmp_path_factory.mktemp("run")
    (here / "trace.csv").write_text(TRACE)
    (here / "c.yaml").write_text(CONFIG)
    result = runner.invoke(app, ["run", str(here / "c.yaml"), "--out", str(here / "run")])
    assert result.exit_code == 0, result.output
    return here / "run"


DAMAGE: dict[str, bytes | None] = {
    "summary.json": b"[1, 2]",
    "config.resolved.yaml": b"\x00\x01\xff",
    "requests.parquet": b"garbage",
    "steps.parquet": b"PAR1",
    "itl.parquet": b"",
}
# read by `simkv trace` only (`simkv report` does not read it)
TRACE_ONLY_DAMAGE: dict[str, bytes | None] = {"preemptions.parquet": b"PAR1garbagePAR1"}
# what `simkv trace` reads (preemptions.parquet may be missing: an older simkv's folder)
TRACE_DAMAGE = ["requests.parquet", "steps.parquet", "itl.parquet", "preemptions.parquet"]


def _damaged(run_dir: Path, tmp_path: Path, name: str, content: bytes | None) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    if content is None:
        (copy / name).unlink()
    else:
        (copy / name).write_bytes(content)
    return copy


@pytest.mark.parametrize(("name", "content"), [*DAMAGE.items(), ("summary.json", None)])
def test_report_on_damaged_folder(
    run_dir: Path, tmp_path: Path, name: str, content: bytes | None
) -> None:
    copy = _damaged(run_dir, tmp_path, name, content)
    before = snapshot(copy)
    assert_clean(["report", str(copy)], (str(copy),), "damaged run folders", ok=False)
    assert snapshot(copy) == before


@pytest.mark.parametrize("name", [*TRACE_DAMAGE, "steps.parquet:missing"])
def test_trace_on_damaged_folder(run_dir: Path, tmp_path: Path, name: str) -> None:
    file, _, missing = name.partition(":")
    copy = _damaged(
        run_dir, tmp_path, file, None if missing else {**DAMAGE, **TRACE_ONLY_DAMAGE}[file]
    )
    before = snapshot(copy)
    assert_clean(["trace", str(copy)], (str(copy),), "damaged run folders", ok=False)
    assert snapshot(copy) == before


@pytest.mark.parametrize("out", ["/dev/null", "{file}", "{file}/sub"])
def test_out_that_cannot_be_a_folder(out: str) -> None:
    here = folder()
    (here / "file").write_text("kept")
    target = out.format(file=here / "file")
    args = ["run", str(here / "c.yaml"), "--out", target]
    assert_clean(args, (target,), "output paths", ok=False)
    assert (here / "file").read_text() == "kept"
    shutil.rmtree(here)


def test_frames_are_untouched_by_a_failed_rerun(run_dir: Path, tmp_path: Path) -> None:
    """A failed run into an existing run folder leaves its files as they were."""
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    before = snapshot(copy)
    config = tmp_path / "bad.yaml"
    config.write_text(CONFIG.replace("block_size: 4", "block_size: -4"))
    args = ["run", str(config), "--out", str(copy)]
    assert_clean(args, (str(config),), "output paths", ok=False)
    assert snapshot(copy) == before
    assert len(pd.read_parquet(copy / "requests.parquet")) == 3


# --- sweep files: refused before any run, at their file and line ----------------------------

SWEEPS: list[bytes] = [
    b"name: s\nbase: c.yaml\ngrid:\n  seed: [null]\n",
    b"name: s\nbase: c.yaml\nzip:\n  seed: [1]\n  kv_cache.block_size: [4, 8]\n",
    b"name: s\nbase: c.yaml\ngrid:\n  seed: []\n",
    b"name: s\nbase: c.yaml\ngrid: [1, 2]\n",
    b"name: s\nbase: c.yaml\ngrid:\n  kv_cache.block_size: [4, 4]\n",
    b"name: s\nbase: c.yaml\ngrid:\n  kv_cache.block_sise: [4]\n",
    b"name: s\nbase: c.yaml\nvariants:\n  v: {scheduler: {kind: nonsense}}\n",
    b"name: s\nbase: c.yaml\noverrides: [nonsense]\n",
    b"name: s\nbase: c.yaml\nrun_timeout_s: -1\n",
    b"name: ..\nbase: c.yaml\n",
    b"name: s\nbase: nowhere.yaml\n",
    b"name: s\nbase: {name: inline}\n",
    b"name: s\nbase: c.yaml\na: &a [*a]\n",
    b"name: s\nbase: c.yaml\n\xff\n",
]


@pytest.mark.parametrize("raw", SWEEPS)
def test_hostile_sweep_file(raw: bytes) -> None:
    here = folder()
    sweep = here / "sweep.yaml"
    sweep.write_bytes(raw)
    out = here / "out"
    args = ["sweep", str(sweep), "--out", str(out)]
    assert_clean(args, (str(here),), "sweep files", ok=False)
    assert not (out / "runs").exists()
    shutil.rmtree(here)


# --- the installed entry point -------------------------------------------------------------

SIMKV = Path(sys.executable).with_name("simkv")


@pytest.mark.skipif(not SIMKV.exists(), reason="simkv entry point not installed")
@pytest.mark.parametrize("index", [0, 1, 2, 5, 14])
def test_entry_point_one_line_no_traceback(index: int) -> None:
    tried("entry point")
    here = folder()
    (here / "c.yaml").write_bytes(HOSTILE_CONFIGS[index])
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [str(SIMKV), "validate", str(here / "c.yaml")],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {here}"), proc.stderr
    shutil.rmtree(here)


def test_entry_point_debug_shows_traceback() -> None:
    if not SIMKV.exists():
        pytest.skip("simkv entry point not installed")
    tried("entry point")
    here = folder()
    (here / "c.yaml").write_bytes(HOSTILE_CONFIGS[2])
    proc = subprocess.run(
        [str(SIMKV), "--debug", "validate", str(here / "c.yaml")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "Traceback" in proc.stderr and "InputError" in proc.stderr
    shutil.rmtree(here)
