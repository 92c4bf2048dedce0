"""Report layout measured in a real browser: for the run report of every shipped config (shrunk
to a couple of hundred requests) and for a comparison report, laid out at a typical 1280 px
window, no two texts of a figure overlap (tick labels, axis labels, titles, legends, notes), no
text is cut by its figure's edge, nothing is wider than the page, no legend covers a plotted
line, no table cell wraps a word, and a run's SLO verdict shows its summary's numbers
(:mod:`tests.report.page_checks`). A comparison with a measured run, a cache-curve page and a
split-search page are measured too.

Figures are inline SVG with text drawn as paths; matplotlib puts each text in a ``<g
id="…text_N">`` group (with the text in a comment), so the boxes measured are those groups'
``getBoundingClientRect``. All pages open one after another in one browser.
"""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import matplotlib as mpl
import pytest
from matplotlib.figure import Figure

from simkv.analysis.cache_curve import prefix_cache_curve
from simkv.report import figures as fg
from simkv.report.cache_curve_report import CurveSetup, write_cache_curve
from simkv.report.compare_real import compare_with_measured, write_comparison
from simkv.report.conventions import format_ms, slo_line
from simkv.report.run_report import render_comparison_report, write_run_report
from simkv.report.splits_report import write_splits_report
from simkv.run import load_config, simulate, write_run
from simkv.workload.content import PromptContent
from tests.conftest import ROOT
from tests.report.chromium import chromium_tab, page_problems, require_chromium
from tests.report.page_checks import ANSWERS_JS, LEGEND_JS, WRAP_JS
from tests.report.test_compare_report import simulate_replay, write_measured_folder
from tests.report.test_splits_report import write_splits_folder

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
    """The run report of every shipped config, then a comparison of the first two runs, a
    comparison with a measured run (``simkv compare``), a cache-curve page and a split-search
    page (the runs are simulated and reported two at a time: forked workers, results in config
    order)."""
    root = tmp_path_factory.mktemp("layout")
    run_dirs = [root / f"{path.parent.name}-{path.stem}" for path in CONFIGS]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        list(pool.map(_run_and_report, CONFIGS, run_dirs))
    compare = root / "compare.html"
    compare.write_text(render_comparison_report(run_dirs[:2]), encoding="utf-8")
    measured = write_measured_folder(root / "measured", (40.0, 20.0))
    (root / "replay").mkdir()
    real = compare_with_measured(simulate_replay(root / "replay", measured), measured)
    real_page = write_comparison(real, root / "real.html", root / "real.csv")[0]
    prompts = [[(i % 30, 16 + 7 * i % 300)] for i in range(300)]
    curve = prefix_cache_curve(PromptContent.from_lists(prompts, range(30, 330)), 16)
    setup = CurveSetup("trace t.jsonl", "llama-3-8b", 2 * 2**20, (("HBM pool", 300),))
    curve_page = write_cache_curve(curve, setup, root / "curve")[1]
    splits_page = write_splits_report(write_splits_folder(root / "splits"))
    pages = [compare, real_page, curve_page, splits_page]
    return [run_dir / "report.html" for run_dir in run_dirs] + pages


def _broken_page(folder: Path) -> Path:
    """A page every check must fault: a legend over the SLO line, a word broken in a cell."""
    with mpl.rc_context(dict(fg.REPORT_RC)):
        fig = Figure(figsize=(6, 3))
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1], label="rising")
        slo_line(ax, 0.97, "SLO")
        ax.legend(loc="lower right")
        svg = fg.svg_of(fig, "broken")
    cell = '<td style="width: 3em; word-break: break-all">r1-9718c1a5f4f6</td>'
    page = folder / "broken.html"
    page.write_text(f'<figure id="broken">{svg}</figure><table id="t"><tr>{cell}</tr></table>')
    return page


def _verdict_problems(page: Path, answers: list[list[str]]) -> list[str]:
    """A run report's marked verdict against its summary.json: each SLO's PASS/FAIL and its
    judged percentile as the file has them (format_ms of the value)."""
    summary = json.loads((page.parent / "summary.json").read_text(encoding="utf-8"))
    out = []
    for key, text in answers:
        if key.endswith("_pass"):
            expected = "PASS" if summary[key] else "FAIL"
        else:
            expected = format_ms(summary[key])
        if text != expected:
            out.append(f"{page.parent.name}: headline {key} shows {text!r}, summary {expected!r}")
    if "slo_pass" in summary and not answers:
        out.append(f"{page.parent.name}: the SLO verdict marks no answer")
    return out


def test_no_text_overlaps_and_nothing_wider_than_the_page(
    pages: list[Path], tmp_path: Path
) -> None:
    """Also: no legend covers a line, no table cell wraps a word, and a run report's verdict
    shows the summary's numbers; the checks fault a deliberately broken page."""
    require_chromium()
    found: list[str] = []
    with chromium_tab(tmp_path / "profile", TIMEOUT_S) as tab:
        for page in pages:
            events = tab.open(page)
            where = page.parent.name if page.name == "report.html" else page.name
            found += [f"{where}: {p}" for p in page_problems(events)]
            for check in (OVERLAPS_JS, OVERFLOWS_JS, LEGEND_JS, WRAP_JS):
                found += [f"{where}: {hit}" for hit in json.loads(tab.value(check))]
            if page.name == "report.html":
                found += _verdict_problems(page, json.loads(tab.value(ANSWERS_JS)))
        tab.open(_broken_page(tmp_path))
        legend_hits, wraps = json.loads(tab.value(LEGEND_JS)), json.loads(tab.value(WRAP_JS))
    assert len(pages) == len(CONFIGS) + 4 == 32
    assert found == [], "\n".join(found)
    assert len(legend_hits) >= 1 and "broken: legend" in legend_hits[0], legend_hits
    assert wraps == ['t: "r1-9718c1a5f4f6"'], wraps
