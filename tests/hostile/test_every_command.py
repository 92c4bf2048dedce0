"""Every command that writes, failed at each of its write steps (out of disk, Ctrl-C): the
right exit code, no traceback, and the earlier result byte-identical; then two commands at
once on one output (the second refused, naming the first)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.calibrate.test_cli_calibrate import write_steps as step_table
from tests.hostile.cli import SIMKV, invoke, leftovers, snapshot, write_steps
from tests.test_cli_waste import SMALL, _azure_csv

CAPACITY = ["--rate-min", "1", "--rate-max", "4", "--per-round", "1", "--tolerance", "0.5"]


def _run(tiny: Path, tmp: Path) -> tuple[list[str], Path]:
    assert invoke(["run", str(tiny), "--out", str(tmp / "run")])[0] == 0
    return ["trace", str(tmp / "run")], tmp / "run"


def _report(tiny: Path, tmp: Path) -> tuple[list[str], Path]:
    assert invoke(["run", str(tiny), "--out", str(tmp / "run")])[0] == 0
    return ["report", str(tmp / "run")], tmp / "run"


def _waste(tiny: Path, tmp: Path) -> tuple[list[str], Path]:
    args = ["waste", str(_azure_csv(tmp / "azure.csv")), "--out", str(tmp / "waste"), *SMALL]
    assert invoke(args)[0] == 0
    return [*args, "--block-sizes", "4,8"], tmp / "waste"


def _calibrate(tiny: Path, tmp: Path) -> tuple[list[str], Path]:
    args = ["calibrate", str(step_table(tmp / "steps.csv")), "--model", "llama-3.1-8b", "--gpu",
            "a100-80gb", "--fit", "seq_overhead_ms", "--max-error", "1", "--out",
            str(tmp / "cal" / "p.yaml")]  # fmt: skip
    assert invoke(args)[0] == 0
    return [*args, "--fit", "seq_overhead_ms,step_overhead_ms"], tmp / "cal"


def _capacity(tiny: Path, tmp: Path) -> tuple[list[str], Path]:
    tiny.write_text(tiny.read_text() + "slo: {ttft_ms: 100000}\n")
    args = ["capacity", str(tiny), "--out", str(tmp / "cap"), *CAPACITY]
    assert invoke(args)[0] == 0
    return [*args, "--set", "seed=5"], tmp / "cap"


COMMANDS: dict[str, Callable[[Path, Path], tuple[list[str], Path]]] = {
    "trace": _run, "report": _report, "waste": _waste, "calibrate": _calibrate,
    "capacity": _capacity,
}  # fmt: skip
"""Each command: a function making its earlier result, returning the command that rewrites
it and the folder that result lives in."""


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("action", ["enospc", "interrupt"])
def test_every_write_step_of_every_command_keeps_the_earlier_result(
    tiny: Path, tmp_path: Path, command: str, action: str
) -> None:
    args, folder = COMMANDS[command](tiny, tmp_path)
    before = snapshot(folder)
    copy = Path(f"{folder}-listed")  # the same command on a copy: its steps, counted
    shutil.copytree(folder, copy, symlinks=True)
    steps = write_steps([a.replace(str(folder), str(copy)) for a in args], tmp_path)
    assert steps >= 1
    enospc = (1, 2) if command == "capacity" else (2,)  # a run out of disk fails that run
    for step in range(1, steps + 1):
        code, output = invoke(args, f"{step}:{action}")
        assert code in (enospc if action == "enospc" else (1, 130)), (command, step, output)
        assert "Traceback" not in output, output
        assert snapshot(folder) == before, (command, step)
        shutil.rmtree(folder.parent / f".{folder.name}.partial", ignore_errors=True)
        assert leftovers(folder.parent) == [], (command, step)
    assert invoke(args)[0] == 0
    assert leftovers(folder.parent) == []


def test_a_second_command_on_an_output_in_use_names_the_first(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = subprocess.Popen(
        [str(SIMKV), "run", "configs/quickstart.yaml", "--out", str(out)],
        cwd=Path(__file__).resolve().parents[2], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lock = tmp_path / ".out.lock"
    try:
        while not (lock.exists() and lock.read_text()) and first.poll() is None:
            time.sleep(0.05)  # until the first command holds the lock (or has ended)
        assert lock.read_text().startswith(f"pid {first.pid} on "), lock.read_text()
        code, output = invoke(["run", str(tiny), "--out", str(out)])
        assert code == 2 and f"in use by pid {first.pid} on " in output, output
    finally:
        first.kill()
        first.wait()
