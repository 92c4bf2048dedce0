"""The test-only fault hook: fail one chosen write step of a process, to prove that no earlier
result changes whatever point a command is stopped at.

``SIMKV_FAULT="<n>:<action>"`` acts at the n-th write step of the process (each file written by
:func:`simkv.outputs.files.write_file` and each folder published is one step, counted from 1):
``enospc`` raises "No space left on device", ``interrupt`` raises KeyboardInterrupt (Ctrl-C),
``kill`` sends the process SIGKILL. ``SIMKV_FAULT=list`` prints ``fault point <n>: <path>`` on
stderr at every step, so a test can enumerate them. Unset (always, outside tests), a step costs
one environment lookup.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from pathlib import Path

FAULT_ENV = "SIMKV_FAULT"
ACTIONS = ("enospc", "interrupt", "kill")

_count: dict[str, int] = {}
"""Steps taken under each fault spec; a new spec (the next test case) counts from 1 again."""


def fault_point(path: Path) -> None:
    """One write step (of ``path``): act if ``SIMKV_FAULT`` names this step."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    if spec not in _count:
        _count.clear()
        _count[spec] = 0
    _count[spec] += 1
    step = _count[spec]
    if spec == "list":
        print(f"fault point {step}: {path}", file=sys.stderr)
        return
    at, _, action = spec.partition(":")
    if not at.isdigit() or int(at) != step:
        return
    if action == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if action == "interrupt":
        raise KeyboardInterrupt
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise ValueError(f"{FAULT_ENV}: unknown action {action!r} (one of {', '.join(ACTIONS)})")


def reset() -> None:
    """Count steps from 1 again (tests running several commands in one process)."""
    _count.clear()
