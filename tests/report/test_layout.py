"""Report layout measured in a real browser: for the run report of every shipped config (shrunk
to a couple of hundred requests) and for a comparison report, laid out at a typical 1280 px
window, no two texts of a figure overlap (tick labels, axis labels, titles, legends, notes), no
text is cut by its figure's edge, and nothing is wider than the page.

Figures are inline SVG with text drawn as paths; matplotlib puts each text in a ``<g
id="…text_N">`` group (with the text in a comment), so the boxes measured are those groups'
``getBoundingClientRect``. All pages open one after another in one browser.
"""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from simkv.report.run_report import render_comparison_report, write_run_report
from simkv.run import load_config, simulate, write_run
from tests.conftest import ROOT
from tests.report.chromium import chromium_tab, page_problems, require_chromium

CONFIGS = sorted(
    path
    for pattern in ("configs/*.yaml", "configs/paper/*.yaml", "configs/measured/*.yaml")
    for path in ROOT.glob(pattern)
)
TIMEOUT_S = 60.0
MIN_OVERLAP_PX = 1.0
"""Two text boxes overlap when they share more than this in both directions (anti-aliasing
lets neighbours touch)."""

# every text box of an SVG reaching past its edge, and every pair of text boxes that intersect
OVERLAPS_JS = """JSON.stringify(Array.from(document.querySelectorAll("figure svg")).flatMap(svg => {
  const said = g => Array.from(g.childNodes).filter(n => n.nodeType === 8)
    .map(n => n.textContent.trim()).join(" ");
  const boxes = Array.from(svg.querySelectorAll('g[id*="-text_"]'))
    .map(g => [said(g) || g.id, g.getBoundingClientRect()])
    .filter(([, r]) => r.width > 0 && r.height > 0);
  const hits = [], edge = svg.getBoundingClientRect(), fig = svg.closest("figure").id;
  for (const [a, r] of boxes) if (r.left < edge.left - MIN_PX || r.right > edge.right + MIN_PX
      || r.top < edge.top - MIN_PX || r.bottom > edge.bottom + MIN_PX) hits.push(fig + ": text "
      + a + " cut by the figure's edge");
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [a, r] = boxes[i], [b, s] = boxes[j];
    const w = Math.min(r.right, s.right) - Math.max(r.left, s.left);
    const h = Math.min(r.bottom, s.bottom) - Math.max(r.top, s.top);
    if (w > MIN_PX && h > MIN_PX) hits.push(fig + ": texts overlap: " + a + " / " + b);
  }
  return hits;
}))""".replace("MIN_PX", str(MIN_OVERLAP_PX))
# the document, and every block of <main> (figures, tables, card grids, cards) within the page
# width and not scrolling (a <pre> of the config scrolls by design)
OVERFLOWS_JS = """JSON.stringify((() => {
  const doc = document.documentElement, main = document.querySelector("main");
  const right = main.getBoundingClientRect().right;
  const out = doc.scrollWidth > doc.clientWidth ? ["document: " + doc.scrollWidth] : [];
  for (const el of main.querySelectorAll("figure, table, section, svg, pre, .card")) {
    const name = el.id || el.tagName + " in " + (el.closest("[id]") || {}).id;
    if (el.getBoundingClientRect().right > right + 0.5) out.push(name + " sticks out");
    if (el.tagName !== "PRE" && el.scrollWidth > el.clientWidth + 0.5) out.push(name + " scrolls");
  }
  return out;
})())"""


def _shrunk(path: Path) -> list[str]:
    """Overrides keeping a couple of hundred requests of the config's workload."""
    text = path.read_text()
    if "num_sessions" in text:
        return ["workload.num_sessions=40"]
    if "num_requests" in text:
        return ["workload.num_requests=200"]
    return ["workload.limit=200"]


def _run_and_report(path: Path, out: Path) -> Path:
    write_run(simulate(load_config(path, _shrunk(path)), path.parent), out)
    return write_run_report(out)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The run report of every shipped config, then a comparison of the first two runs (the
    runs are simulated and reported two at a time: forked workers, results in config order)."""
    root = tmp_path_factory.mktemp("layout")
    run_dirs = [root / f"{path.parent.name}-{path.stem}" for path in CONFIGS]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        list(pool.map(_run_and_report, CONFIGS, run_dirs))
    compare = root / "compare.html"
    compare.write_text(render_comparison_report(run_dirs[:2]), encoding="utf-8")
    return [run_dir / "report.html" for run_dir in run_dirs] + [compare]


def test_no_text_overlaps_and_nothing_wider_than_the_page(
    pages: list[Path], tmp_path: Path
) -> None:
    require_chromium()
    found: list[str] = []
    with chromium_tab(tmp_path / "profile", TIMEOUT_S) as tab:
        for page in pages:
            events = tab.open(page)
            where = page.parent.name if page.name == "report.html" else page.name
            found += [f"{where}: {p}" for p in page_problems(events)]
            found += [f"{where}: {hit}" for hit in json.loads(tab.value(OVERLAPS_JS))]
            found += [f"{where}: {hit}" for hit in json.loads(tab.value(OVERFLOWS_JS))]
    assert len(pages) == len(CONFIGS) + 1 == 25
    assert found == [], "\n".join(found)
