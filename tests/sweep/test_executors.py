"""Executors: one interface, every result delivered once, clear errors for bad choices."""

from __future__ import annotations

import sys

import pytest

from simkv.errors import InputError
from simkv.sweep.executors import ProcessExecutor, SerialExecutor, make_executor


def test_serial_yields_in_item_order() -> None:
    assert list(SerialExecutor().map_unordered(abs, [-3, 1, -2])) == [3, 1, 2]


def test_process_pool_yields_every_result_once() -> None:
    results = ProcessExecutor(jobs=2).map_unordered(abs, [-3, 1, -2, 5])
    assert sorted(results) == [1, 2, 3, 5]
    assert list(ProcessExecutor(jobs=2).map_unordered(abs, [])) == []


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
        ("process", 0, "--jobs: must be at least 1, got 0"),
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
