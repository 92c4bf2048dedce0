"""The run report in a real headless Chromium: it loads without console errors or network
requests, every figure's SVG is laid out with a non-zero size, and a screenshot is not blank.

The browser is driven over the DevTools pipe (:mod:`tests.report.chromium`); without Chromium
the tests skip, or fail when the ``CI`` environment variable is set.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from simkv.report.compare_real import compare_with_measured, write_comparison
from simkv.report.run_report import write_run_report
from tests.report.chromium import WINDOW, chromium_tab, page_problems, require_chromium
from tests.report.test_compare_report import simulate_replay, write_measured_folder
from tests.report.test_run_report import FIGURE_IDS, build_tiny_run

TIMEOUT_S = 20.0
SIZES_JS = """JSON.stringify(Array.from(document.querySelectorAll("figure")).map(f => {
  const svg = f.querySelector("svg");
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  return [f.id, box.width, box.height];
}))"""
OVERFLOW_JS = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


@pytest.fixture(scope="module")
def chromium() -> Path:
    return require_chromium()


def _render(page: Path, tmp_path: Path) -> dict[str, Any]:
    """Load ``page`` in a fresh headless Chromium: title, figure sizes, horizontal overflow
    (px), the problems seen and a PNG screenshot."""
    with chromium_tab(tmp_path / f"profile-{page.stem}", TIMEOUT_S) as tab:
        tab.open(page)
        out = {"title": tab.value("document.title"), "figures": json.loads(tab.value(SIZES_JS)),
               "overflow_px": tab.value(OVERFLOW_JS), "png": tab.screenshot()}  # fmt: skip
    out["problems"] = page_problems(tab.browser.events)
    return out


def _check_screenshot(png: bytes, path: Path) -> None:
    path.write_bytes(png)  # kept for a look when this fails
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.size == WINDOW
    colours = image.getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 16, "screenshot is (nearly) a single colour"


def test_report_renders_in_chromium(chromium: Path, tmp_path: Path) -> None:
    report = write_run_report(build_tiny_run(tmp_path / "run"))
    seen = _render(report, tmp_path)
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
    seen = _render(page, tmp_path)
    assert seen["title"].startswith("simkv vs measured")
    assert [fig_id for fig_id, _, _ in seen["figures"]] == ["fig-latency-cdf", "fig-load"]
    for fig_id, width, height in seen["figures"]:
        assert width > 100 and height > 100, f"{fig_id} SVG laid out at {width}×{height}"
    assert seen["overflow_px"] <= 0, "the page is wider than the window"
    assert seen["problems"] == []
    _check_screenshot(seen["png"], tmp_path / "compare.png")
