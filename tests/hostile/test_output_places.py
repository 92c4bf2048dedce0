"""Where an output cannot go: a full file system, a read-only folder, a name too long, a path
under a file, a file of another kind; and the commands that write one file (calibrate,
compare, report). Each is one located line, the right exit code, the earlier result intact."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from simkv.cli import app
from tests.calibrate.test_cli_calibrate import write_steps
from tests.hostile.cli import invoke, leftovers, one_line, runner, snapshot

ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0


@contextmanager
def mounted(*args: str) -> Iterator[None]:
    """``mount ARGS`` for the block (root only), unmounted after."""
    target = args[-1]
    subprocess.run(["mount", *args], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", target], check=False, capture_output=True)


def _can_mount(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
                          capture_output=True, check=False)  # fmt: skip
    subprocess.run(["umount", str(probe)], capture_output=True, check=False)
    return done.returncode == 0


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_full_file_system_names_the_file_and_keeps_the_earlier_run(
    tiny: Path, tmp_path: Path
) -> None:
    if not ROOT_USER or not _can_mount(tmp_path):
        pytest.skip("mounting a small tmpfs needs root (and a kernel that allows it)")
    probe = tmp_path / "probe-run"
    assert invoke(["run", str(tiny), "--out", str(probe)])[0] == 0
    # room for one run and a half: the second run's staging copy cannot fit beside the first
    disk = tmp_path / "disk"
    disk.mkdir()
    size_kib = (_size(probe) * 3 // 2) // 1024 + 8
    with mounted("-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(disk)):
        shutil.copytree(probe, disk / "out")
        before = snapshot(disk / "out")
        code, output = invoke(["run", str(tiny), "--out", str(disk / "out"), "--set", "seed=3"])
        assert code == 2
        line = one_line(output)
        assert "No space left on device" in line and str(disk / "out") in line, line
        assert snapshot(disk / "out") == before
        assert leftovers(disk) == []


def test_a_read_only_folder_is_one_line(tiny: Path, tmp_path: Path) -> None:
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    (shelf / "x").write_text("x")
    if ROOT_USER and _can_mount(tmp_path):
        guard = mounted("--bind", "-o", "ro", str(shelf), str(shelf))
    elif not ROOT_USER:
        shelf.chmod(0o555)
        guard = contextmanager(lambda: (yield))()
    else:
        pytest.skip("root without mount: a folder cannot be made read-only")
    with guard:
        code, output = invoke(["run", str(tiny), "--out", str(shelf / "out")])
    assert code == 2
    assert "cannot create the output under" in one_line(output) and str(shelf) in output


def test_a_name_too_long_and_a_path_under_a_file(tiny: Path, tmp_path: Path) -> None:
    code, output = invoke(["run", str(tiny), "--out", str(tmp_path / ("n" * 250))])
    assert code == 2 and "name" in one_line(output)
    (tmp_path / "afile").write_text("x")
    code, output = invoke(["run", str(tiny), "--out", str(tmp_path / "afile" / "out")])
    assert code == 2 and "cannot create the output under" in one_line(output)
    assert leftovers(tmp_path) == []


def _calibrate(tmp_path: Path, out: Path, *more: str) -> tuple[int, str]:
    steps = write_steps(tmp_path / "steps.csv")
    result = runner.invoke(app, ["calibrate", str(steps), "--model", "llama-3.1-8b", "--gpu",
                                 "a100-80gb", "--fit", "seq_overhead_ms", "--out", str(out),
                                 *more])  # fmt: skip
    return result.exit_code, result.output


def test_a_rejected_fit_leaves_the_earlier_profile_unchanged(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    code, output = _calibrate(tmp_path, profile, "--max-error", "1")
    assert code == 0, output
    before = profile.read_bytes()
    code, output = _calibrate(tmp_path, profile, "--max-error", "0.0001")
    assert code == 1 and "was not written" in output
    assert profile.read_bytes() == before


def test_calibrate_refuses_a_file_that_is_no_profile_before_the_fit(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("important: true\n")
    code, output = _calibrate(tmp_path, mine, "--max-error", "1")
    assert code == 2 and "not a calibration profile" in one_line(output)
    assert mine.read_text() == "important: true\n"
    code, output = _calibrate(tmp_path, mine, "--max-error", "1", "--force")
    assert code == 0, output
    assert mine.read_text().startswith("# simkv calibration profile")


def test_report_refuses_a_page_it_did_not_write_unless_forced(tiny: Path, tmp_path: Path) -> None:
    for name in ("a", "b"):
        assert invoke(["run", str(tiny), "--out", str(tmp_path / name)])[0] == 0
    page = tmp_path / "page.html"
    page.write_text("<html>mine</html>")
    args = ["report", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(page)]
    code, output = invoke(args)
    assert code == 2 and "not a simkv page" in one_line(output)
    assert page.read_text() == "<html>mine</html>"
    assert invoke([*args, "--force"])[0] == 0
    assert invoke(args)[0] == 0  # now a simkv page: rewritten without --force
    code, output = invoke(["report", str(tmp_path / "a"), str(tmp_path / "b"), "--out",
                           str(tmp_path / "a")])  # fmt: skip
    assert code == 2 and "is a folder" in one_line(output)
