"""A pool of spawned worker processes whose failures stay with one item.

Contract: ``jobs`` long-lived workers ("spawn": fresh interpreters, no inherited threads or
locks), each running one item at a time. The parent tracks which item each worker runs, so

* a worker that dies (killed by the out-of-memory killer, ``kill -9``) loses only its item:
  ``lost(item, "worker died ...")`` stands for that item's result and a fresh worker takes its
  place; the other items go on;
* an item running longer than ``timeout_s`` gets its worker killed and ``lost(item, "timeout
  ...")`` as its result;
* a Ctrl-C never reaches a worker: a terminal sends it to the whole process group, and a
  worker still importing (before its loop ignores SIGINT) would die printing a traceback, so
  workers start with SIGINT blocked (:func:`_sigint_held`) and keep it blocked; the parent's
  own Ctrl-C waits until the workers being started have their start data, then is handled;
* workers die with the parent: on Linux each worker asks the kernel for SIGKILL when its parent
  dies (``prctl(PR_SET_PDEATHSIG)``), so a ``kill -9`` of the sweep leaves no worker behind; when
  the iteration ends early (an error, Ctrl-C) the parent kills the workers itself.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")
LostFn = Callable[[Any, str], Any]
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent(parent_pid: int) -> None:
    """Ask for SIGKILL when the parent dies (Linux); exit if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(1)


@contextmanager
def _sigint_held() -> Iterator[None]:
    """SIGINT blocked in this thread for the block, so a process spawned in it inherits the
    block and never sees a Ctrl-C: the mask survives spawn's fork and exec (multiprocessing's
    resource tracker relies on the same). This process's own Ctrl-C is held too, never lost:
    another thread (a progress bar's) may take the signal while this one blocks it, and Python
    would then raise ``KeyboardInterrupt`` here mid-spawn, before the child has read its start
    data (it dies printing a traceback); so, in the main thread, the SIGINT handler only notes
    the signal during the block and the previous handler gets it when the block ends. The
    resource tracker is started first: starting it unblocks SIGINT."""
    resource_tracker.ensure_running()
    held: list[int] = []
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda signum, _: held.append(signum)) if main else None
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a blocked one is noted now
        if main:
            signal.signal(signal.SIGINT, previous)
            if held:
                signal.raise_signal(signal.SIGINT)  # to the handler it was meant for


def _serve(conn: Connection, fn: Callable[[Any], Any], parent_pid: int) -> None:
    """A worker's loop: receive an item, send back its result; ``None`` ends it."""
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    while (item := conn.recv()) is not None:
        conn.send(("started",))  # the time limit counts from here, not from the spawn
        conn.send(("done", fn(item[0])))


class _Worker:
    """One worker process, its end of the pipe and the item it runs (with its start time, s)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process: BaseProcess = context.Process(
            target=_serve, args=(child, fn, os.getpid()), daemon=True
        )
        self.process.start()
        child.close()
        self.item: Any = None
        self.started_s: float | None = None  # when it started the item (monotonic s)
        self.busy = False

    def give(self, item: Any) -> None:
        self.conn.send((item,))
        self.item, self.started_s, self.busy = item, None, True

    def kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()


def _outcome(worker: _Worker, timeout_s: float | None) -> tuple[bool, Any, str | None]:
    """(finished, result, reason lost): poll a busy worker without blocking."""
    try:
        while worker.conn.poll():
            message = worker.conn.recv()
            if message[0] == "done":
                return True, message[1], None
            worker.started_s = time.monotonic()
    except (EOFError, OSError):
        pass  # it died while sending: lost
    if not worker.process.is_alive():
        code = worker.process.exitcode
        return True, None, f"worker died (exit code {code}; killed by the OOM killer?)"
    started = worker.started_s
    if timeout_s is not None and started is not None and time.monotonic() - started > timeout_s:
        return True, None, f"timeout: ran longer than {timeout_s:g} s"
    return False, None, None


def map_isolated(
    fn: Callable[[T], R], items: Sequence[T], jobs: int, lost: Callable[[T, str], R],
    timeout_s: float | None = None,
) -> Iterator[R]:  # fmt: skip
    """``fn`` over ``items`` on ``jobs`` workers; results as they finish (see the module)."""
    todo = deque(items)
    workers: list[_Worker] = []
    try:
        with _sigint_held():
            for _ in range(min(jobs, len(items))):
                workers.append(_Worker(fn))
        while todo or any(w.busy for w in workers):
            for worker in workers:
                if not worker.busy and todo:
                    worker.give(todo.popleft())
            busy = [w for w in workers if w.busy]
            wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=1.0)
            for k, worker in enumerate(workers):
                if not worker.busy:
                    continue
                done, result, reason = _outcome(worker, timeout_s)
                if not done:
                    continue
                worker.busy = False
                if reason is None:
                    yield result
                    continue
                worker.kill()
                if todo:
                    with _sigint_held():
                        workers[k] = _Worker(fn)
                yield lost(worker.item, reason)
    finally:
        for worker in workers:
            worker.kill()
