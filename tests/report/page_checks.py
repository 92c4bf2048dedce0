"""Checks the browser layout tests run on every report page (issue 33's "Done when").

* :data:`LEGEND_JS`: no legend box overlaps a plotted line. In matplotlib's SVG a legend is a
  ``<g id="…legend_N">`` group and a line a ``<g id="…line2d_N">`` group holding a path (and,
  for markers, ``<use>`` elements); each line's path is sampled with
  ``getTotalLength``/``getPointAtLength`` through ``getScreenCTM``, points outside the line's
  clip rectangle (its panel) dropped, and tested against the legend's
  ``getBoundingClientRect``; lines inside a legend (its sample lines) are skipped, and so are
  unclipped lines (tick marks).
* :data:`WRAP_JS`: no table cell wraps a word: a Range over each whitespace-separated word of
  every ``td``/``th`` has one client rectangle.
* :data:`ANSWERS_JS`: every ``[data-answer]`` element's key and text, for comparing the
  headline's numbers with the summary files.
"""

from __future__ import annotations

import re

SAMPLES = 60
"""Points sampled along each line path."""
LEGEND_JS = """JSON.stringify(Array.from(document.querySelectorAll("figure svg")).flatMap(svg => {
  const fig = (svg.closest("figure") || {id: "?"}).id, hits = [];
  const legends = Array.from(svg.querySelectorAll('g[id*="legend_"]'))
    .filter(g => /legend_\\d+$/.test(g.id));
  const lines = Array.from(svg.querySelectorAll('g[id*="line2d_"]'))
    .filter(g => /line2d_\\d+$/.test(g.id) && !g.closest('g[id*="legend_"]'));
  for (const legend of legends) {
    const box = legend.getBoundingClientRect();
    if (box.width <= 0 || box.height <= 0) continue;
    for (const line of lines) {
      const points = [];
      for (const path of line.querySelectorAll(":scope > path")) {
        const clip = /url\\(#([^)]+)\\)/.exec(path.getAttribute("clip-path") || "");
        const rect = clip && document.getElementById(clip[1]).querySelector("rect");
        if (!rect) continue;  // unclipped: tick marks, not data
        const m = path.getScreenCTM(), at = (x, y) => new DOMPoint(x, y).matrixTransform(m);
        const x = +rect.getAttribute("x"), y = +rect.getAttribute("y");
        const a = at(x, y);
        const b = at(x + +rect.getAttribute("width"), y + +rect.getAttribute("height"));
        const l = Math.min(a.x, b.x), r = Math.max(a.x, b.x);
        const t = Math.min(a.y, b.y), bo = Math.max(a.y, b.y);
        const length = path.getTotalLength();
        for (let i = 0; i <= SAMPLES; i++) {
          const p = path.getPointAtLength(length * i / SAMPLES), s = at(p.x, p.y);
          if (s.x >= l && s.x <= r && s.y >= t && s.y <= bo) points.push(s);
        }
      }
      for (const use of line.querySelectorAll("use")) {
        const u = use.getBoundingClientRect();
        points.push({x: u.left + u.width / 2, y: u.top + u.height / 2});
      }
      const hit = points.find(p => p.x > box.left && p.x < box.right && p.y > box.top
                                   && p.y < box.bottom);
      if (hit) hits.push(fig + ": legend " + legend.id + " covers line " + line.id);
    }
  }
  return hits;
}))""".replace("SAMPLES", str(SAMPLES))
WRAP_JS = r"""JSON.stringify(Array.from(document.querySelectorAll("td, th")).flatMap(cell => {
  const broken = [];
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const m of node.data.matchAll(/\S+/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      if (range.getClientRects().length > 1) broken.push(
        ((cell.closest("table") || {}).id || "table") + ": " + JSON.stringify(m[0]));
    }
  }
  return broken;
}))"""
ANSWERS_JS = """JSON.stringify(Array.from(document.querySelectorAll("[data-answer]"))
  .map(e => [e.dataset.answer, e.textContent]))"""
NUMBER = re.compile(r"-?[\d,]*\.?\d+")


def shown_number(text: str) -> float:
    """The number a headline shows (``4.808``, ``are 3``, ``1,335 ms`` → 1335.0)."""
    found = NUMBER.search(text)
    if found is None:
        raise ValueError(f"no number in {text!r}")
    return float(found.group(0).replace(",", ""))
