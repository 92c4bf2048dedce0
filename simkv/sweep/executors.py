"""Where a sweep's runs execute: in this process, in a local process pool, or on ray.

Every executor has one method, :meth:`Executor.map_unordered`: call a picklable top-level
function on each item and yield the results as they finish (any order). The function does its own
writing (a run folder) and returns a small record, so nothing large crosses a process boundary.
An executor owns the pool it starts and tears it down when the iteration ends or is abandoned
(an error, Ctrl-C): calls not yet started are cancelled, and a call cut short leaves an
incomplete run folder, which a resumed sweep redoes. The process executor also isolates
failures (:mod:`simkv.sweep.pool`): ``lost(item, reason)`` stands for the result of an item whose
worker died or ran past ``timeout_s``. The function is expected to enforce ``timeout_s`` itself
where it can (the serial and ray executors rely on that).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Literal, Protocol, TypeVar

from simkv.errors import InputError
from simkv.sweep.pool import map_isolated

T = TypeVar("T")
R = TypeVar("R")
ExecutorKind = Literal["serial", "process", "ray"]
EXECUTOR_KINDS: tuple[str, ...] = ("serial", "process", "ray")
KILL_GRACE_S = 10.0  # a worker still busy this long after its run's time limit is killed


class Executor(Protocol):
    """Runs ``fn`` over ``items``; yields each result as soon as its call returns."""

    def map_unordered(
        self, fn: Callable[[T], R], items: Sequence[T], lost: Callable[[T, str], R],
        timeout_s: float | None = None,
    ) -> Iterator[R]: ...  # fmt: skip


class SerialExecutor:
    """In this process, in item order: the reference every other executor must match."""

    def map_unordered(
        self, fn: Callable[[T], R], items: Sequence[T], lost: Callable[[T, str], R],
        timeout_s: float | None = None,
    ) -> Iterator[R]:  # fmt: skip
        for item in items:
            yield fn(item)


@dataclass(frozen=True)
class ProcessExecutor:
    """A pool of ``jobs`` fresh ("spawn") Python processes (:mod:`simkv.sweep.pool`):
    simulations are CPU-bound Python; a worker's death fails only its own item."""

    jobs: int

    def map_unordered(
        self, fn: Callable[[T], R], items: Sequence[T], lost: Callable[[T, str], R],
        timeout_s: float | None = None,
    ) -> Iterator[R]:  # fmt: skip
        """A worker past ``timeout_s`` + :data:`KILL_GRACE_S` is killed (``fn`` had its chance
        to time out cleanly and did not)."""
        if not items:
            return
        limit = None if timeout_s is None else timeout_s + KILL_GRACE_S
        yield from map_isolated(fn, items, self.jobs, lost, limit)


def import_ray() -> ModuleType:
    """The ``ray`` module, or an :class:`InputError` telling how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError(
            "the ray executor needs ray: pip install -e '.[ray]'", field="--executor"
        ) from None
    return ray


@dataclass(frozen=True)
class RayExecutor:
    """Ray tasks of one CPU each: on the cluster at ``address`` if given, else on a local ray
    started with ``jobs`` CPUs. A ray already initialised in this process is used as is.

    Run folders are written by the workers, so on a multi-node cluster the output folder (and
    the traces the configs name) must be on a file system every node sees at the same path.
    """

    jobs: int
    address: str | None = None

    def _start(self, ray: ModuleType) -> bool:
        """Initialise ray unless it already is; True when this call started it."""
        if ray.is_initialized():
            return False
        if self.address is not None:
            ray.init(address=self.address, log_to_driver=False)
        else:
            ray.init(num_cpus=self.jobs, include_dashboard=False, log_to_driver=False)
        return True

    def map_unordered(
        self, fn: Callable[[T], R], items: Sequence[T], lost: Callable[[T, str], R],
        timeout_s: float | None = None,
    ) -> Iterator[R]:  # fmt: skip
        if not items:
            return
        ray = import_ray()
        started = self._start(ray)
        pending: list = []
        try:
            remote_fn = ray.remote(num_cpus=1)(fn)
            pending = [remote_fn.remote(item) for item in items]
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                yield ray.get(done[0])
        finally:
            for ref in pending:
                ray.cancel(ref)
            if started:
                ray.shutdown()


def make_executor(
    kind: str, *, jobs: int | None = None, ray_address: str | None = None
) -> Executor:
    """The executor named ``kind``; ``jobs`` defaults to the machine's CPU count."""
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise InputError(f"must be at least 1, got {workers}", field="--jobs")
    if kind == "serial":
        return SerialExecutor()
    if kind == "process":
        return ProcessExecutor(workers)
    if kind == "ray":
        import_ray()  # fail before any run starts
        return RayExecutor(workers, ray_address)
    raise InputError(
        f"unknown executor {kind!r}; choose one of {', '.join(EXECUTOR_KINDS)}",
        field="--executor",
    )
