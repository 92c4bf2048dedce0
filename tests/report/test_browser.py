"""The run report in a real headless Chromium: it loads without console errors or network
requests, every figure's SVG is laid out with a non-zero size, and a screenshot is not blank.

Chromium is driven over the DevTools protocol on ``--remote-debugging-pipe`` (the browser
reads NUL-terminated JSON commands on fd 3 and writes replies and events on fd 4), so no
Python browser package is needed. Without ``/usr/bin/chromium`` (or ``$SIMKV_CHROMIUM``) the
test skips, or fails when the ``CI`` environment variable is set.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import io
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from simkv.report.compare_real import compare_with_measured, write_comparison
from simkv.report.run_report import write_run_report
from tests.report.test_compare_report import simulate_replay, write_measured_folder
from tests.report.test_run_report import FIGURE_IDS, build_tiny_run

CHROMIUM = Path(os.environ.get("SIMKV_CHROMIUM", "/usr/bin/chromium"))
TIMEOUT_S = 20.0
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--window-size=1280,1000", "--remote-debugging-pipe",
)  # fmt: skip
SIZES_JS = """JSON.stringify(Array.from(document.querySelectorAll("figure")).map(f => {
  const svg = f.querySelector("svg");
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  return [f.id, box.width, box.height];
}))"""


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


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} not found: install Debian's chromium package"
        if os.environ.get("CI"):
            pytest.fail(message + " (required when CI is set)")
        pytest.skip(message)
    return CHROMIUM


def _problems(events: list[dict[str, Any]]) -> list[str]:
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


OVERFLOW_JS = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


def _render(chromium: Path, page: Path, tmp_path: Path) -> dict[str, Any]:
    """Load ``page`` in a fresh headless Chromium: title, figure sizes, horizontal overflow
    (px), the events seen and a PNG screenshot."""
    profile = tmp_path / f"profile-{page.stem}"
    profile.mkdir()
    browser = DevToolsPipe(profile, deadline=time.monotonic() + TIMEOUT_S)
    try:
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        session = browser.call("Target.attachToTarget", targetId=target, flatten=True)
        sid = session["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            browser.call(f"{domain}.enable", sid)
        browser.call("Emulation.setDeviceMetricsOverride", sid, width=1280, height=1000,
                     deviceScaleFactor=1, mobile=False)  # fmt: skip
        browser.call("Page.navigate", sid, url=page.as_uri())
        browser.wait_for("Page.loadEventFired")

        def value(expression: str) -> Any:
            reply = browser.call("Runtime.evaluate", sid, expression=expression,
                                 returnByValue=True)  # fmt: skip
            return reply["result"]["value"]

        out = {"title": value("document.title"), "figures": json.loads(value(SIZES_JS)),
               "overflow_px": value(OVERFLOW_JS)}  # fmt: skip
        out["png"] = base64.b64decode(browser.call("Page.captureScreenshot", sid,
                                                   format="png")["data"])  # fmt: skip
    finally:
        browser.close()
    out["problems"] = _problems(browser.events)
    return out


def _check_screenshot(png: bytes, path: Path) -> None:
    path.write_bytes(png)  # kept for a look when this fails
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.size == (1280, 1000)
    colours = image.getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 16, "screenshot is (nearly) a single colour"


def test_report_renders_in_chromium(chromium: Path, tmp_path: Path) -> None:
    report = write_run_report(build_tiny_run(tmp_path / "run"))
    seen = _render(chromium, report, tmp_path)
    assert seen["title"] == "simkv run report: tiny"
    assert [fig_id for fig_id, _, _ in seen["figures"]] == FIGURE_IDS
    for fig_id, width, height in seen["figures"]:
        assert width > 100 and height > 100, f"{fig_id} SVG laid out at {width}×{height}"
    assert seen["problems"] == []
    _check_screenshot(seen["png"], tmp_path / "screenshot.png")


def test_compare_page_renders_in_chromium(chromium: Path, tmp_path: Path) -> None:
    """``simkv compare``'s page: figures laid out, nothing wider than the window."""
    measured = write_measured_folder(tmp_path / "real", (40.0, 20.0))
    cmp = compare_with_measured(simulate_replay(tmp_path, measured), measured)
    page, _ = write_comparison(cmp, tmp_path / "compare.html", tmp_path / "compare.csv")
    seen = _render(chromium, page, tmp_path)
    assert seen["title"].startswith("simkv vs measured")
    assert [fig_id for fig_id, _, _ in seen["figures"]] == ["fig-latency-cdf", "fig-load"]
    for fig_id, width, height in seen["figures"]:
        assert width > 100 and height > 100, f"{fig_id} SVG laid out at {width}×{height}"
    assert seen["overflow_px"] <= 0, "the page is wider than the window"
    assert seen["problems"] == []
    _check_screenshot(seen["png"], tmp_path / "compare.png")
