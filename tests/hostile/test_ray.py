"""Ray start-up through the installed entry point: an address where nothing listens and a ray
that cannot start are one line and exit 2, quickly; start-up has a time limit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from simkv.errors import InputError
from simkv.sweep import executors
from tests.capacity.conftest import CONFIG

SIMKV = str(Path(sys.executable).parent / "simkv")
QUICK_S = 60  # ray itself would retry for about 20 minutes


def _free_port() -> int:
    """A local TCP port where nothing listens (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _simkv(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SIMKV, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=QUICK_S, env=env)  # fmt: skip


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "cap.yaml").write_text(CONFIG)
    (tmp_path / "sweep.yaml").write_text("name: s\nbase: cap.yaml\ngrid:\n  seed: [1, 2]\n")
    return tmp_path


@pytest.mark.parametrize("command", ["sweep", "capacity"])
def test_an_address_where_nothing_listens_is_one_line_exit_2(files: Path, command: str) -> None:
    pytest.importorskip("ray")
    address = f"127.0.0.1:{_free_port()}"
    target = "sweep.yaml" if command == "sweep" else "cap.yaml"
    # a hang is a failure: _simkv's subprocess timeout raises
    done = _simkv(command, target, "--executor", "ray", "--ray-address", address, cwd=files)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"error: --ray-address: no ray cluster answers at {address} (connection refused): "
        "start one there (ray start --head) or leave --ray-address out to start a local ray"
    ]
    assert not (files / "reports").exists()  # refused before any run


def test_an_address_without_a_port_is_one_line_exit_2(files: Path) -> None:
    pytest.importorskip("ray")
    done = _simkv("sweep", "sweep.yaml", "--executor", "ray", "--ray-address", "h:x", cwd=files)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: --ray-address: expected HOST:PORT, ray://HOST:PORT or auto, got 'h:x'"
    ]


def test_a_ray_that_cannot_start_is_one_line_exit_2(files: Path) -> None:
    """Ray's session folder under a regular file: the local ray cannot start."""
    pytest.importorskip("ray")
    (files / "a-file").write_text("")
    env = {**os.environ, "RAY_TMPDIR": str(files / "a-file" / "ray")}
    done = _simkv("sweep", "sweep.yaml", "--executor", "ray", "--jobs", "1", cwd=files, env=env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "error: --executor: ray could not start locally: NotADirectoryError: [Errno 20] Not a "
        f"directory: '{files / 'a-file' / 'ray'}'"
    ]


def test_ray_start_up_has_a_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ray whose init never returns (here: sleeps) is cut at RAY_START_TIMEOUT_S."""

    def init(**_: object) -> None:
        time.sleep(30)

    fake = SimpleNamespace(is_initialized=lambda: False, init=init, shutdown=lambda: None)
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(executors, "RAY_START_TIMEOUT_S", 0.5)
    ray = executors.RayExecutor(jobs=1, address="10.0.0.1:6379")
    with pytest.raises(InputError) as err:  # without the limit: no error, after 30 s
        list(ray.map_unordered(abs, [1], lambda item, reason: reason))
    assert str(err.value) == (
        "--ray-address: ray could not start at 10.0.0.1:6379: RayStartTimeout: not started "
        "within 0.5 s"
    )
