"""A wall-clock limit on a block of code: the one SIGALRM timer of sweeps.

:func:`time_limit` raises the caller's exception in the block once ``seconds`` have passed. It
is a SIGALRM timer, so it works only in a process's main thread (where the CLI, the serial
executor and the process pool's workers run); elsewhere it does nothing and the caller needs
another limit (the process pool kills a worker past its time). The exception is raised between
Python bytecodes: code blocked inside a C extension sees it only when it returns to Python.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def time_limit(seconds: float | None, expired: Callable[[], Exception]) -> Iterator[None]:
    """Raise ``expired()`` in this block after ``seconds`` of wall time (None: no limit)."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum: int, _frame: object) -> None:
        raise expired()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
