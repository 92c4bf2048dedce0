"""Headless Chromium over the DevTools pipe, shared by the browser tests (no browser package).

Chromium is driven over the DevTools protocol on ``--remote-debugging-pipe`` (the browser
reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4). Without
``/usr/bin/chromium`` (or ``$SIMKV_CHROMIUM``) :func:`require_chromium` skips the test, or
fails it when the ``CI`` environment variable is set. :class:`Tab` opens several pages one
after another in one browser, so a test pays for one browser start.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import subprocess
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("SIMKV_CHROMIUM", "/usr/bin/chromium"))
WINDOW = (1280, 1000)
"""A typical laptop browser window (CSS px), the size every page is laid out at."""
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", f"--window-size={WINDOW[0]},{WINDOW[1]}", "--remote-debugging-pipe",
)  # fmt: skip


def require_chromium() -> Path:
    """The Chromium binary; skips the test without one (fails when ``CI`` is set)."""
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} not found: install Debian's chromium package"
        if os.environ.get("CI"):
            pytest.fail(message + " (required when CI is set)")
        pytest.skip(message)
    return CHROMIUM


class DevToolsPipe:
    """A DevTools-protocol client over a Chromium started with ``--remote-debugging-pipe``.

    Replies are matched to commands by id; every event seen is kept in :attr:`events`. A read
    that gets nothing for ``read_timeout_s`` raises ``TimeoutError`` (a hang guard: no clock is
    read, nothing is timed).
    """

    def __init__(self, user_data_dir: Path, read_timeout_s: float) -> None:
        self.read_timeout_s = read_timeout_s
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
            ready, _, _ = select.select([self._from_browser], [], [], self.read_timeout_s)
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

    def wait_for(self, method: str, since: int = 0) -> dict[str, Any]:
        """Read until an event named ``method`` arrives (or one already did, at index
        ``since`` or later in :attr:`events`); returns it."""
        for event in self.events[since:]:
            if event.get("method") == method:
                return event
        while True:
            event = self._read_message()
            self.events.append(event)
            if event.get("method") == method:
                return event

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


class Tab:
    """One page target of a :class:`DevToolsPipe` at :data:`WINDOW` size, reused for every
    page :meth:`open` loads (Runtime, Log, Network and Page events enabled)."""

    def __init__(self, browser: DevToolsPipe) -> None:
        self.browser = browser
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        self.sid = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            browser.call(f"{domain}.enable", self.sid)
        browser.call("Emulation.setDeviceMetricsOverride", self.sid, width=WINDOW[0],
                     height=WINDOW[1], deviceScaleFactor=1, mobile=False)  # fmt: skip

    def open(self, page: Path) -> list[dict[str, Any]]:
        """Load ``page`` and wait for its load event; returns the events seen while loading."""
        since = len(self.browser.events)
        self.browser.call("Page.navigate", self.sid, url=page.as_uri())
        self.browser.wait_for("Page.loadEventFired", since)
        return self.browser.events[since:]

    def value(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression evaluated in the page."""
        reply = self.browser.call("Runtime.evaluate", self.sid, expression=expression,
                                  returnByValue=True)  # fmt: skip
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression[:60]}…: {reply['exceptionDetails']}")
        return reply["result"]["value"]

    def settle(self) -> None:
        """Wait until every image of the page is decoded and two frames have been drawn: the
        load event comes before the raster, so a screenshot taken at once can catch a large
        image half painted."""
        painted = ("Promise.all([...document.images].map(i => i.decode().catch(() => null)))"
                   ".then(() => new Promise(r => requestAnimationFrame(() =>"
                   " requestAnimationFrame(() => r(true)))))")  # fmt: skip
        reply = self.browser.call("Runtime.evaluate", self.sid, expression=painted,
                                  awaitPromise=True, returnByValue=True)  # fmt: skip
        if "exceptionDetails" in reply:
            raise RuntimeError(f"settle: {reply['exceptionDetails']}")

    def screenshot(self, *, full_page: bool = False) -> bytes:
        """A PNG of the window (or, with ``full_page``, of the whole page), once the page has
        settled (:meth:`settle`)."""
        import base64

        self.settle()
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            height = self.value("document.documentElement.scrollHeight")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": WINDOW[0], "height": height,
                                "scale": 1})  # fmt: skip
        data = self.browser.call("Page.captureScreenshot", self.sid, **params)["data"]
        return base64.b64decode(data)


@contextlib.contextmanager
def chromium_tab(profile: Path, timeout_s: float):  # type: ignore[no-untyped-def]
    """A :class:`Tab` in a fresh headless Chromium (profile folder ``profile``), closed after;
    a DevTools read that waits ``timeout_s`` for the browser gives up (``TimeoutError``)."""
    profile.mkdir(parents=True, exist_ok=True)
    browser = DevToolsPipe(profile, read_timeout_s=timeout_s)
    try:
        yield Tab(browser)
    finally:
        browser.close()


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


DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "report-screenshot.png"
"""The README's screenshot: written only when asked (``--write-docs``), as it is tracked."""


def main(argv: list[str]) -> None:
    """``python -m tests.report.chromium PAGE [PNG] [--height H] [--write-docs]``: the top ``H``
    CSS px (default 1700) of PAGE at the :data:`WINDOW` width, scaled to 3/4 (the README's
    screenshot). PNG defaults to ``report-screenshot.png`` beside PAGE (a run folder, ignored by
    git); ``--write-docs`` writes :data:`DOCS_SCREENSHOT`, the tracked copy, instead."""
    import argparse
    import io
    import tempfile

    from PIL import Image

    parser = argparse.ArgumentParser(
        prog="python -m tests.report.chromium", description="Screenshot the top of a report page."
    )
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path, nargs="?",
                        help="output PNG (default: report-screenshot.png beside PAGE)")  # fmt: skip
    parser.add_argument("--height", type=int, default=1700, help="CSS px kept from the top")
    parser.add_argument("--write-docs", action="store_true",
                        help=f"write the tracked {DOCS_SCREENSHOT.name} under docs/")  # fmt: skip
    args = parser.parse_args(argv)
    if args.write_docs and args.png is not None:
        parser.error("give PNG or --write-docs, not both")
    page = args.page.resolve()
    png = DOCS_SCREENSHOT if args.write_docs else args.png or page.parent / DOCS_SCREENSHOT.name
    with tempfile.TemporaryDirectory() as profile, chromium_tab(Path(profile), 60.0) as tab:
        tab.open(page)
        image = Image.open(io.BytesIO(tab.screenshot(full_page=True))).convert("RGB")
    top = image.crop((0, 0, WINDOW[0], min(args.height, image.height)))
    size = (top.width * 3 // 4, top.height * 3 // 4)
    top.resize(size, Image.Resampling.LANCZOS).save(png, optimize=True)
    print(f"wrote {png}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
