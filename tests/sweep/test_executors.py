"""Executors: one interface, every result delivered once, clear errors for bad choices."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from simkv.errors import InputError
from simkv.sweep.executors import (
    ProcessExecutor,
    RayExecutor,
    SerialExecutor,
    make_executor,
    ray_held,
)
from simkv.sweep.pool import map_isolated


def _lost(item: int, reason: str) -> str:
    return f"{item}: {reason}"


def _dies_on_minus_one(item: int) -> int:
    """Killed like the out-of-memory killer would on item -1; sleeps on item -2."""
    if item == -1:
        os.kill(os.getpid(), signal.SIGKILL)
    if item == -2:
        time.sleep(30)
    return abs(item)


def test_serial_yields_in_item_order() -> None:
    assert list(SerialExecutor().map_unordered(abs, [-3, 1, -2], _lost)) == [3, 1, 2]


def test_process_pool_yields_every_result_once() -> None:
    results = ProcessExecutor(jobs=2).map_unordered(abs, [-3, 1, -2, 5], _lost)
    assert sorted(results) == [1, 2, 3, 5]
    assert list(ProcessExecutor(jobs=2).map_unordered(abs, [], _lost)) == []


def test_a_dead_worker_loses_only_its_item() -> None:
    results = list(map_isolated(_dies_on_minus_one, [3, -1, 4, 5, 6], 2, _lost))
    assert sorted(r for r in results if isinstance(r, int)) == [3, 4, 5, 6]
    assert [r for r in results if isinstance(r, str)] == [
        "-1: worker died (exit code -9; killed by the OOM killer?)"
    ]


def test_a_worker_past_the_time_limit_is_killed() -> None:
    results = list(map_isolated(_dies_on_minus_one, [3, -2, 4], 2, _lost, timeout_s=1.0))
    assert sorted(r for r in results if isinstance(r, int)) == [3, 4]
    assert [r for r in results if isinstance(r, str)] == ["-2: timeout: ran longer than 1 s"]


def test_make_executor_kinds() -> None:
    assert isinstance(make_executor("serial"), SerialExecutor)
    assert make_executor("process", jobs=3) == ProcessExecutor(3)


@pytest.mark.parametrize(
    ("kind", "jobs", "message"),
    [
        (
            "threads",
            None,
            "--executor: unknown executor 'threads'; choose one of serial, process, ray",
        ),
        ("process", 0, "--jobs: must lie in 1..256, got 0"),
    ],
)
def test_bad_executor_choices(kind: str, jobs: int | None, message: str) -> None:
    with pytest.raises(InputError) as err:
        make_executor(kind, jobs=jobs)
    assert str(err.value) == message


def test_ray_missing_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    with pytest.raises(InputError) as err:
        make_executor("ray", jobs=2)
    assert str(err.value) == "--executor: the ray executor needs ray: pip install -e '.[ray]'"


class _FakeRay:
    """Just what :func:`ray_held` and a ray executor's start call: init, shutdown, state."""

    def __init__(self) -> None:
        self.up, self.inits, self.shutdowns = False, 0, 0

    def is_initialized(self) -> bool:
        return self.up

    def init(self, **_: object) -> None:
        self.up, self.inits = True, self.inits + 1

    def shutdown(self) -> None:
        self.up, self.shutdowns = False, self.shutdowns + 1


def test_ray_held_starts_ray_once_for_every_search_inside(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    with ray_held("ray", jobs=2):
        for _ in range(3):  # each search's executor finds ray up and leaves it up
            assert RayExecutor(2)._start(fake) is False  # type: ignore[arg-type]
    assert (fake.inits, fake.shutdowns, fake.up) == (1, 1, False)
    monkeypatch.setitem(sys.modules, "ray", None)  # the other executors never import ray
    with ray_held("process", jobs=2), ray_held("serial"):
        pass
