"""Nothing a user had is lost: every command's output is published whole or not at all, a
folder in use is locked, and another kind of output is never overwritten without --force.

Each write step of a command (each file, and the folder's publication) is failed in turn with
the fault hook (:mod:`simkv.outputs.faults`): out of disk, Ctrl-C, SIGKILL; after each, the
earlier result must be byte-identical and the next command must succeed and clean up.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from simkv.outputs import locked
from tests.hostile.cli import (
    invoke,
    leftovers,
    one_line,
    snapshot,
    spawn,
    write_paths,
    write_steps,
)


@pytest.fixture
def good_run(tiny: Path, tmp_path: Path) -> Path:
    """A complete run folder ``tmp_path/out`` of the tiny config."""
    code, output = invoke(["run", str(tiny), "--out", str(tmp_path / "out")])
    assert code == 0, output
    return tmp_path / "out"


def test_a_rerun_leaves_no_stale_file_and_keeps_the_users(tiny: Path, good_run: Path) -> None:
    assert invoke(["trace", str(good_run)])[0] == 0
    (good_run / "notes.txt").write_text("mine\n")
    code, output = invoke(["run", str(tiny), "--out", str(good_run), "--format", "csv"])
    assert code == 0, output
    names = {p.name for p in good_run.iterdir()}
    assert "trace.json" not in names and "requests.parquet" not in names
    assert (good_run / "notes.txt").read_text() == "mine\n"
    assert {"requests.csv", "summary.json", "report.html"} <= names
    marker = json.loads((good_run / ".simkv-output").read_text())
    assert marker["kind"] == "run" and "notes.txt" not in marker["files"]
    assert leftovers(good_run.parent) == []


@pytest.mark.parametrize(("action", "code"), [("enospc", 2), ("interrupt", 130)])
def test_a_run_failing_at_any_write_step_changes_nothing(
    tiny: Path, good_run: Path, action: str, code: int
) -> None:
    args = ["run", str(tiny), "--out", str(good_run), "--set", "seed=7", "--trace"]
    steps = write_steps([*args, "--out", str(good_run.parent / "listed")], good_run.parent)
    assert steps >= 9  # marker, 3 frames, summary, config, trace, report, marker, publish
    before = snapshot(good_run)
    for step in range(1, steps + 1):
        got, output = invoke(args, f"{step}:{action}")
        assert got == code, (step, output)
        line = one_line(output)
        if action == "enospc":
            assert "No space left on device" in line and str(good_run) in line, line
        assert snapshot(good_run) == before, step
        assert leftovers(good_run.parent) == [], step
    assert invoke(args)[0] == 0
    assert snapshot(good_run) != before


@pytest.mark.parametrize("step", [1, 3, 8, 9, 10])
def test_a_run_killed_at_a_write_step_changes_nothing_and_the_next_cleans_up(
    tiny: Path, good_run: Path, step: int
) -> None:
    args = ["run", str(tiny), "--out", str(good_run), "--set", "seed=7", "--trace"]
    before = snapshot(good_run)
    killed = spawn(args, good_run.parent, f"{step}:kill")
    assert killed.returncode == -9
    assert snapshot(good_run) == before
    done = spawn(args, good_run.parent)
    assert done.returncode == 0, done.stderr
    assert leftovers(good_run.parent) == []


def test_a_folder_in_use_is_refused_naming_its_holder(tiny: Path, good_run: Path) -> None:
    before = snapshot(good_run)
    with locked(good_run):
        code, output = invoke(["run", str(tiny), "--out", str(good_run)])
        assert code == 2
        assert f"in use by pid {os.getpid()} on " in one_line(output)
        code, output = invoke(["trace", str(good_run)])
        assert code == 2 and "in use by pid" in one_line(output)
    assert snapshot(good_run) == before


def test_a_lock_left_by_a_dead_process_is_taken_over(tiny: Path, good_run: Path) -> None:
    lock = good_run.parent / f".{good_run.name}.lock"  # written, never flock-ed: its holder died
    lock.write_text("pid 4194304 on elsewhere since 2026-01-01 00:00:00 UTC\n")
    code, output = invoke(["run", str(tiny), "--out", str(good_run)])
    assert code == 0, output
    assert not lock.exists()


@pytest.mark.parametrize(
    ("make", "expect"),
    [
        (lambda p: p.write_text("x"), "output is not a folder"),
        (lambda p: (p.mkdir(), (p / "thesis.tex").write_text("x")), "not a simkv output"),
        (lambda p: (p.mkdir(), (p / "sweep.json").write_text("{}")), "holds a sweep output"),
    ],
    ids=["file", "foreign", "sweep"],
)
def test_another_kind_of_output_is_refused_unless_forced(
    tiny: Path, tmp_path: Path, make, expect: str
) -> None:
    out = tmp_path / "taken"
    make(out)
    before = snapshot(out) if out.is_dir() else out.read_bytes()
    code, output = invoke(["run", str(tiny), "--out", str(out)])
    assert code == 2 and expect in one_line(output) and "--force" in output
    assert (snapshot(out) if out.is_dir() else out.read_bytes()) == before
    code, output = invoke(["run", str(tiny), "--out", str(out), "--force"])
    assert code == 0, output
    assert (out / "summary.json").is_file() and not (out / "thesis.tex").exists()


def test_capacity_refuses_a_sweep_folder(tiny: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"name: s\nbase: {tiny}\ngrid:\n  seed: [1, 2]\n")
    out = tmp_path / "s"
    assert invoke(["sweep", str(sweep), "--out", str(out)])[0] == 0
    before = snapshot(out)
    tiny.write_text(tiny.read_text() + "slo: {ttft_ms: 1000}\n")
    code, output = invoke(["capacity", str(tiny), "--out", str(out)])
    assert code == 2 and "holds a sweep output" in one_line(output)
    assert snapshot(out) == before


@pytest.mark.parametrize("action", ["enospc", "interrupt"])
def test_a_sweep_into_a_complete_sweep_failing_at_any_step_changes_nothing(
    tiny: Path, tmp_path: Path, action: str
) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"name: s\nbase: {tiny}\ngrid:\n  seed: [1, 2]\n")
    out = tmp_path / "s"
    assert invoke(["sweep", str(sweep), "--out", str(out)])[0] == 0
    before = snapshot(out)
    sweep.write_text(f"name: s\nbase: {tiny}\ngrid:\n  seed: [3, 4]\n")
    args = ["sweep", str(sweep), "--out", str(out)]
    steps = write_steps([*args, "--out", str(tmp_path / "listed")], tmp_path)
    for step in range(1, steps + 1):
        got, output = invoke(args, f"{step}:{action}")
        # out of disk in a run fails that run (exit 1: the sweep is kept aside), elsewhere the
        # sweep (exit 2); Ctrl-C stops it (130)
        assert got in ((1, 2) if action == "enospc" else (130,)), (step, output)
        assert "Traceback" not in output
        if got == 1:
            assert "is as it was" in output and ".s.partial" in output
        assert snapshot(out) == before, step
        shutil.rmtree(tmp_path / ".s.partial", ignore_errors=True)  # what the next continues
    code, output = invoke([*args, "--resume"])
    assert code == 0, output
    table = json.loads((out / "sweep.json").read_text())
    assert len(table["runs"]) == 2 and all(r.startswith(("s3-", "s4-")) for r in table["runs"])
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(table["runs"])
    assert leftovers(tmp_path) == []


def test_an_interrupted_sweep_keeps_its_finished_runs_for_resume(
    tiny: Path, tmp_path: Path
) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"name: s\nbase: {tiny}\ngrid:\n  seed: [1, 2, 3]\n")
    out = tmp_path / "s"
    args = ["sweep", str(sweep), "--out", str(out)]
    points = [
        k
        for k, path in enumerate(write_paths([*args, "--out", str(tmp_path / "l")], tmp_path), 1)
        if path.endswith("point.json")
    ]
    code, output = invoke(args, f"{points[1]}:interrupt")  # the first run is finished by then
    assert code == 130 and ".s.partial" in output and "--resume" in output
    assert not out.exists()
    code, output = invoke([*args, "--resume"])
    assert code == 0, output
    assert "1 skipped" in output
    assert leftovers(tmp_path) == []
