"""Sweep faults through the real CLI: per-run time limit, a worker killed (as the OOM killer
would), the sweep parent killed, damaged run folders and edited input files on --resume."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from simkv.cli import app

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
SIMKV = Path(sys.executable).parent / "simkv"
runner = CliRunner()


def _sweep(tmp_path: Path, limits: list[int], base: Path = QUICKSTART) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: faults\nbase: {base}\ngrid:\n  workload.limit: {limits}\n")
    return path


def test_a_run_past_the_time_limit_fails_and_the_sweep_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["sweep", str(_sweep(tmp_path, [10, 19366])), "--out", str(out),
              "--run-timeout", "1"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    table = pd.read_parquet(out / "sweep.parquet")
    assert list(table.status) == ["ok", "failed"]
    assert table.error[1].startswith("timeout: ran longer than 1 s")


def test_resume_redoes_damaged_folders_and_edited_traces(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.01,20,3\n0.02,7,9\n")
    base = tmp_path / "base.yaml"
    base.write_text(
        "name: b\nworkload: {kind: trace, path: trace.csv, format: generic, columns: "
        "{arrival_s: arrival_s}}\nmodel: {preset: llama-2-7b, max_model_len: 64}\n"
        "gpu: a100-80gb\nkv_cache: {block_size: 4, num_blocks: 40}\nscheduler: {kind: vllm_v1}\n"
    )
    sweep, out = _sweep(tmp_path, [1, 2, 3], base), tmp_path / "out"
    args = ["sweep", str(sweep), "--out", str(out), "--resume"]
    assert runner.invoke(app, args).exit_code == 0
    runs = sorted((out / "runs").iterdir())
    (runs[0] / "summary.json").write_text('{"num_requests": 1')  # truncated
    (runs[1] / "steps.parquet").write_bytes(b"PAR1 not a parquet file")
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert "2 runs ran, 1 skipped" in again.output
    (runs[2] / "config.resolved.yaml").write_text("")
    assert "1 runs ran, 2 skipped" in runner.invoke(app, args).output
    trace.write_text(trace.read_text() + "0.03,11,4\n")  # an edited trace: every run again
    edited = runner.invoke(app, args)
    assert "3 runs ran, 0 skipped" in edited.output
    table = pd.read_parquet(out / "sweep.parquet")
    assert list(table.num_requests) == [1, 2, 3] and set(table.status) == {"ok"}


def _wait_exit(pid: int, timeout_s: float) -> None:
    """Return when process ``pid`` has exited (its pidfd turns readable), or after
    ``timeout_s`` if it never does (the assertion after the call then fails)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already gone
    try:
        select.select([fd], [], [], timeout_s)
    finally:
        os.close(fd)


def _workers(pid: int, timeout_s: float = 60) -> list[int]:
    """The sweep's pool workers (spawned children, not multiprocessing's resource tracker)."""
    for _ in range(int(timeout_s / 0.2)):  # a hang guard: polls, no clock read
        found = []
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"spawn_main" in cmdline:
                found.append(int(child))
        if len(found) == 2:
            return found
        time.sleep(0.2)
    raise AssertionError("the sweep started no workers")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _interruptible() -> None:
    """Give the sweep Ctrl-C's default action, as a shell at a terminal does: a test run
    launched in the background of a script inherits SIGINT ignored, and so would the sweep."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(tmp_path: Path) -> subprocess.Popen[bytes]:
    sweep = _sweep(tmp_path, [4000, 4001, 4002, 4003])
    return subprocess.Popen(
        [str(SIMKV), "sweep", str(sweep), "--out", str(tmp_path / "out"),
         "--executor", "process", "--jobs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
        preexec_fn=_interruptible,
    )  # fmt: skip


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_worker_fails_only_its_run(tmp_path: Path) -> None:
    sweep = _start(tmp_path)
    victim = _workers(sweep.pid)[0]
    time.sleep(1.0)
    os.kill(victim, signal.SIGKILL)
    _, stderr = sweep.communicate(timeout=300)
    assert sweep.returncode == 1, stderr.decode()
    assert b"Traceback" not in stderr
    table = pd.read_parquet(tmp_path / "out" / "sweep.parquet")
    failed = table[table.status == "failed"]
    assert len(failed) == 1 and (table.status == "ok").sum() == 3
    assert failed.error.iloc[0].startswith("worker died (exit code -9")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, prctl")
def test_workers_die_with_the_sweep_parent(tmp_path: Path) -> None:
    sweep = _start(tmp_path)
    workers = _workers(sweep.pid)
    sweep.kill()
    sweep.wait()
    for worker in workers:  # wait for each exit itself (the timeout is only a hang guard)
        _wait_exit(worker, timeout_s=60)
    assert not any(_alive(w) for w in workers)
    assert not (tmp_path / "out").exists()  # never published: the sweep waits in its staging
    assert json.loads((tmp_path / ".out.partial" / "sweep.json").read_text())["name"] == "faults"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_stops_the_workers_and_prints_the_resume_command(tmp_path: Path) -> None:
    sweep = _start(tmp_path)
    workers = _workers(sweep.pid)
    sweep.send_signal(signal.SIGINT)
    _, stderr = sweep.communicate(timeout=60)
    assert sweep.returncode == 130
    text = stderr.decode()
    assert "Traceback" not in text
    assert "interrupted" in text and "--resume" in text
    assert not any(_alive(w) for w in workers)


def test_the_time_limit_from_the_sweep_file_under_the_process_executor(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path, [10, 19366])
    sweep.write_text(sweep.read_text() + "run_timeout_s: 1\n")
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["sweep", str(sweep), "--out", str(out), "--executor", "process", "--jobs", "2"]
    )
    assert result.exit_code == 1, result.output
    table = pd.read_parquet(out / "sweep.parquet")
    assert list(table.status) == ["ok", "failed"]
    assert table.error[1] == "timeout: ran longer than 1 s"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_while_the_workers_start_prints_one_line(tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the whole process group: the workers too, here while they
    still import (before their loop could ignore it). The workers get it first (so that no
    race with the parent's cleanup hides what they print), then the whole group: the sweep
    prints its one line and no worker prints a traceback."""
    sweep = _sweep(tmp_path, [4000, 4001, 4002, 4003])
    process = subprocess.Popen(
        [str(SIMKV), "sweep", str(sweep), "--out", str(tmp_path / "out"),
         "--executor", "process", "--jobs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
        preexec_fn=_interruptible, start_new_session=True,
    )  # fmt: skip
    workers = _workers(process.pid)  # spawned, still importing simkv and pandas
    for worker in workers:
        os.kill(worker, signal.SIGINT)
    time.sleep(1.0)  # a worker that did not ignore it prints its traceback meanwhile
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    text = stderr.decode()
    assert process.returncode == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    lines = [line for line in text.splitlines() if not line.startswith("sweep ")]
    assert len(lines) == 1 and lines[0].startswith("interrupted:"), text
    assert not any(_alive(w) for w in workers)


@pytest.fixture
def default_ctrl_c() -> Iterator[None]:
    """Ctrl-C's default action (KeyboardInterrupt) for the test, however pytest was launched:
    a shell's background job starts with SIGINT ignored, and the test would inherit that."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("through_another_thread", [False, True])
def test_a_ctrl_c_while_workers_start_waits_for_the_block(
    through_another_thread: bool, default_ctrl_c: None
) -> None:
    """A Ctrl-C arriving while workers are being spawned is held until they are started (a
    KeyboardInterrupt mid-spawn leaves a child without its start data, and it dies printing a
    traceback), then raised: whether it reaches this thread (blocked, delivered when the block
    ends) or another one (a progress bar's thread takes it, Python runs the handler here)."""
    import threading

    from simkv.sweep.pool import _sigint_held

    go, sent = threading.Event(), threading.Event()

    def send() -> None:
        go.wait(10)
        os.kill(os.getpid(), signal.SIGINT)  # the kernel picks a thread not blocking it: this one
        sent.set()

    helper = threading.Thread(target=send, daemon=True)
    if through_another_thread:
        helper.start()  # before the block, so this thread does not inherit the block
    reached_the_end = False
    with pytest.raises(KeyboardInterrupt), _sigint_held():
        if through_another_thread:
            go.set()
            assert sent.wait(10)
        else:
            signal.raise_signal(signal.SIGINT)  # to this thread, which blocks it
        time.sleep(0.2)  # a handler would run here (sleep is interruptible)
        reached_the_end = True
    assert reached_the_end
