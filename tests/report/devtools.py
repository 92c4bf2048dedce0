"""Headless Chromium driven over the DevTools protocol, for the report layout tests.

Chromium is started with ``--remote-debugging-pipe``: it reads NUL-terminated JSON commands on
fd 3 and writes replies and events on fd 4, so no Python browser package is needed. Without
``/usr/bin/chromium`` (or ``$SIMKV_CHROMIUM``) the tests that use :func:`require_chromium` skip,
or fail when the ``CI`` environment variable is set.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("SIMKV_CHROMIUM", "/usr/bin/chromium"))
TIMEOUT_S = 20.0
WINDOW = (1280, 1000)
"""Window size (px) the pages are laid out in."""
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", f"--window-size={WINDOW[0]},{WINDOW[1]}", "--remote-debugging-pipe",
)  # fmt: skip


def require_chromium() -> Path:
    """The Chromium binary; skips the calling test without it (fails instead when CI is set)."""
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} not found: install Debian's chromium package"
        if os.environ.get("CI"):
            pytest.fail(message + " (required when CI is set)")
        pytest.skip(message)
    return CHROMIUM


class DevToolsPipe:
    """A DevTools-protocol client over a Chromium started with ``--remote-debugging-pipe``.

    Replies are matched to commands by id; every event seen is kept in :attr:`events`. Every
    read is bounded by the deadline given at start (``TimeoutError`` past it).
    """

    def __init__(self, user_data_dir: Path, deadline: float) -> None:
        self.deadline = deadline
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self._buffer = b""
        to_child, self._to_browser = os.pipe()
        self._from_browser, from_child = os.pipe()

        def wire_fds() -> None:  # in the child: the pipe ends become fds 3 and 4
            high_in = fcntl.fcntl(to_child, fcntl.F_DUPFD, 10)
            high_out = fcntl.fcntl(from_child, fcntl.F_DUPFD, 10)
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        self.stderr = user_data_dir / "stderr.log"
        with self.stderr.open("wb") as err:
            self.proc = subprocess.Popen(
                [str(CHROMIUM), *FLAGS, f"--user-data-dir={user_data_dir}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                preexec_fn=wire_fds, close_fds=False,
            )  # fmt: skip
        os.close(to_child)
        os.close(from_child)

    def _read_message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = self.deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(left, 0.0))
            if not ready:
                raise TimeoutError(f"no DevTools reply in time; see {self.stderr}")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ConnectionError(f"Chromium closed the pipe; see {self.stderr}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command and return its ``result`` (``RuntimeError`` on a protocol error)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        """Read until an event named ``method`` arrives (or one already did); returns it."""
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._read_message()
            self.events.append(event)
            if event.get("method") == method:
                return event

    def open_page(self, url: str) -> str:
        """Load ``url`` in a new tab laid out at :data:`WINDOW`; returns the tab's session id.

        Events of earlier pages are dropped first, so :attr:`events` then holds this page's.
        """
        self.events.clear()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        sid = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.call(f"{domain}.enable", sid)
        self.call("Emulation.setDeviceMetricsOverride", sid, width=WINDOW[0], height=WINDOW[1],
                  deviceScaleFactor=1, mobile=False)  # fmt: skip
        self.call("Page.navigate", sid, url=url)
        self.wait_for("Page.loadEventFired")
        return sid

    def evaluate(self, session: str, expression: str) -> Any:
        """The value of a JavaScript expression in the page of ``session``."""
        reply = self.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
        return reply["result"]["value"]

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError, ConnectionError):
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


def page_problems(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions, dialogs and network requests seen in ``events``."""
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append(f"console: {params.get('args')}")
        elif method == "Runtime.exceptionThrown":
            found.append(f"exception: {params.get('exceptionDetails')}")
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url')}")
        elif method == "Page.javascriptDialogOpening":
            found.append(f"dialog: {params.get('message')}")
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if not url.startswith(("file:", "data:", "about:")):
                found.append(f"network request: {url}")
    return found
