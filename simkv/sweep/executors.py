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

Ray starts within :data:`RAY_START_TIMEOUT_S`: a ``--ray-address`` is first reached over TCP
(nothing listening, an unknown host or no answer in time is bad input, before any run), then
joining the cluster or starting a local ray must finish in that time; a ray that fails to start
or to join is one line (:class:`InputError` naming ``--ray-address`` or ``--executor``), never
a traceback or a wait of minutes (ray itself retries a silent address for about 20 minutes);
ray's own log lines below ERROR are not shown. The limit is a SIGALRM timer, so a ray call
blocked in its C++ core (one connection attempt: about 40 s) can overrun it by that much.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Literal, Protocol, TypeVar
from urllib.parse import urlsplit

from simkv.errors import InputError
from simkv.sweep.deadline import time_limit
from simkv.sweep.pool import map_isolated

T = TypeVar("T")
R = TypeVar("R")
ExecutorKind = Literal["serial", "process", "ray"]
EXECUTOR_KINDS: tuple[str, ...] = ("serial", "process", "ray")
KILL_GRACE_S = 10.0  # a worker still busy this long after its run's time limit is killed
RAY_START_TIMEOUT_S = 60.0
"""Seconds ray may take to answer at ``--ray-address`` (TCP) and then to join or start."""


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


def ray_endpoint(address: str) -> tuple[str, int] | None:
    """The host and port of a ``--ray-address`` (``HOST:PORT`` or ``ray://HOST:PORT``); None
    for ``auto`` and ``local``, which name none. :class:`InputError` when there is no port."""
    if address in ("auto", "local"):
        return None
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number in 0-65535
        host, port = None, None
    if not host or port is None:
        raise InputError(
            f"expected HOST:PORT, ray://HOST:PORT or auto, got {address!r}", field="--ray-address"
        )
    return host, port


def check_ray_address(address: str) -> None:
    """:class:`InputError` unless something accepts a TCP connection at ``address`` within
    :data:`RAY_START_TIMEOUT_S` (refused, unknown host, no answer)."""
    endpoint = ray_endpoint(address)
    if endpoint is None:
        return
    try:
        with socket.create_connection(endpoint, timeout=RAY_START_TIMEOUT_S):
            pass
    except OSError as err:
        reason = err.strerror or str(err) or type(err).__name__
        raise InputError(
            f"no ray cluster answers at {address} ({reason.lower()}): start one there "
            "(ray start --head) or leave --ray-address out to start a local ray",
            field="--ray-address",
        ) from None


class RayStartTimeout(Exception):
    """Ray did not join or start within :data:`RAY_START_TIMEOUT_S`."""


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or "no message"
    return f"{type(err).__name__}: {text}"


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
        """Initialise ray unless it already is, within :data:`RAY_START_TIMEOUT_S`; True when
        this call started it. A failure or a timeout is an :class:`InputError`."""
        if ray.is_initialized():
            return False
        field = "--ray-address" if self.address is not None else "--executor"
        where = f"at {self.address}" if self.address is not None else "locally"
        limit = RAY_START_TIMEOUT_S
        try:
            with time_limit(limit, lambda: RayStartTimeout(f"not started within {limit:g} s")):
                quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
                if self.address is not None:
                    ray.init(address=self.address, **quiet)
                else:
                    ray.init(num_cpus=self.jobs, include_dashboard=False, **quiet)
        except Exception as err:  # ray raises many kinds; each is one line here
            if ray.is_initialized():
                ray.shutdown()
            raise InputError(
                f"ray could not start {where}: {_one_line(err)}", field=field
            ) from None
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


MAX_JOBS = 256
"""Most parallel runs of one command: each process-pool worker is a Python process holding a
run's frames (hundreds of MB for a long trace), all started at once."""


def make_executor(
    kind: str, *, jobs: int | None = None, ray_address: str | None = None
) -> Executor:
    """The executor named ``kind``; ``jobs`` defaults to the machine's CPU count."""
    workers = jobs if jobs is not None else min(os.cpu_count() or 1, MAX_JOBS)
    if not 1 <= workers <= MAX_JOBS:
        raise InputError(f"must lie in 1..{MAX_JOBS}, got {workers}", field="--jobs")
    if kind == "serial":
        return SerialExecutor()
    if kind == "process":
        return ProcessExecutor(workers)
    if kind == "ray":
        import_ray()  # fail before any run starts
        if ray_address is not None:
            check_ray_address(ray_address)
        return RayExecutor(workers, ray_address)
    raise InputError(
        f"unknown executor {kind!r}; choose one of {', '.join(EXECUTOR_KINDS)}",
        field="--executor",
    )


@contextmanager
def ray_held(
    kind: str, *, jobs: int | None = None, ray_address: str | None = None
) -> Iterator[None]:
    """For a command of many searches (the split search): with ``kind`` ray, ray started once
    for all of them (each search's :class:`RayExecutor` then uses it as is) and shut down at the
    end, instead of once per round; nothing for the other executors."""
    if kind != "ray":
        yield
        return
    pool = make_executor(kind, jobs=jobs, ray_address=ray_address)
    ray = import_ray()
    started = isinstance(pool, RayExecutor) and pool._start(ray)
    try:
        yield
    finally:
        if started:
            ray.shutdown()
