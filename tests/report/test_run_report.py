"""The HTML run report: contents, escaping, self-containment, byte stability, size and speed.

The tiny run is the vLLM-v1 preemption scenario of tests/engine/test_golden.py plus one request
too long for the model: A = (prompt 4, out 6) and B = (4, 4) at t=0 in 3 usable blocks of 4
tokens (4 with vLLM V1's null block);
both get their first token at 18 ms; B is preempted once; A ends at 73 ms, B at 110 ms; C (prompt
20 > max_model_len 12) is rejected. Its trace file lives at ``…/<script>alert(1)</script>.csv``,
so the path reaches the header and the resolved config.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simkv.errors import InputError
from simkv.metrics.recorder import STEP_COLUMNS
from simkv.report import figures as fg
from simkv.report.run_report import (
    format_ms,
    load_run,
    render_comparison_report,
    render_run_report,
    write_run_report,
)
from simkv.run import simulate, write_run
from tests.engine.helpers import tiny_config

EVIL = "<script>alert(1)</script>"
# vllm_v1 caches prefixes by default (vLLM 0.11), so its report has the prefix-cache cards; the
# tiny run never hits the cache, so the prefix-cache figure is replaced by one line saying so
FIGURE_IDS = ["fig-latency-cdf", "fig-throughput", "fig-kv-memory", "fig-waste-breakdown",
              "fig-queues", "fig-dist-steps", "fig-dist-latency", "fig-dist-workload"]  # fmt: skip
CARD_IDS = [
    "card-request-throughput", "card-output-throughput", "card-goodput", "card-ttft",
    "card-tpot", "card-e2el", "card-preemptions", "card-swap", "card-rejected", "card-aborted",
    "card-prefix-hits", "card-prefill-saved",
]  # fmt: skip


def build_tiny_run(root: Path, *, num_blocks: int = 4) -> Path:
    """Simulate the tiny scenario (module docstring) and write its run folder ``root/run``."""
    evil_dir = root / "<script>alert(1)<"
    evil_dir.mkdir(parents=True)
    reqs = [(0.0, 4, 6), (0.0, 4, 4), (0.001, 20, 2)]
    cfg = tiny_config(evil_dir, reqs, {"kind": "vllm_v1"}, num_blocks=num_blocks,
                      max_model_len=12)  # fmt: skip
    trace = evil_dir / "script>.csv"
    (evil_dir / "trace.csv").rename(trace)
    assert str(trace).endswith(EVIL + ".csv")
    cfg = cfg.model_copy(update={"workload": cfg.workload.model_copy(update={"path": trace})})
    out = simulate(cfg, root)
    write_run(out, root / "run")
    return root / "run"


class _Outline(HTMLParser):
    """Collects element ids, each <figure>'s inner tags and each card's text."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.figures: dict[str, set[str]] = {}
        self.text_by_id: dict[str, str] = {}
        self._figure: str | None = None
        self._card: str | None = None
        self._card_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        ident = dict(attrs).get("id")
        if ident:
            self.ids.append(ident)
        if tag == "figure" and ident:
            self._figure = ident
            self.figures[ident] = set()
        elif self._figure is not None:
            self.figures[self._figure].add(tag)
        if ident and ident.startswith("card-"):
            self._card = ident
            self.text_by_id[ident] = ""
        if self._card is not None and tag == "div":
            self._card_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._figure = None
        if self._card is not None and tag == "div":
            self._card_depth -= 1
            if self._card_depth == 0:
                self._card = None

    def handle_data(self, data: str) -> None:
        if self._card is not None and data.strip():
            self.text_by_id[self._card] += " " + data.strip()


def _outline(page: str) -> _Outline:
    parser = _Outline()
    parser.feed(page)
    return parser


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def page(run_dir: Path) -> str:
    return render_run_report(run_dir)


def test_every_figure_has_an_id_an_svg_and_a_caption(page: str) -> None:
    outline = _outline(page)
    assert list(outline.figures) == FIGURE_IDS
    assert re.search(r'<p class="left-out" id="fig-prefix-cache-left-out"><b>Prefix cache:</b> '
                     r"no prefix-cache hits in this run", page)  # fmt: skip
    assert '<p class="left-out">no swapping in this run</p>' in page  # vllm_v1 never swaps
    assert "preemptions (cumulative)" in page  # B was preempted: that panel is drawn
    for tags in outline.figures.values():
        assert {"svg", "figcaption"} <= tags
    assert len(set(outline.ids)) == len(outline.ids), "duplicate element ids (SVGs included)"


def test_cards_show_the_hand_computed_values(page: str) -> None:
    text = _outline(page).text_by_id
    assert list(text) == CARD_IDS
    assert text["card-request-throughput"] == " Request throughput 18.2 req/s"  # 2 / 0.110 s
    assert text["card-goodput"] == " Goodput — no SLO set"
    assert text["card-ttft"] == " TTFT p50 18 ms p99 18 ms time to first token"
    # E2EL 73 and 110 ms: median 91.5, p99 73 + 0.99 × 37 = 109.63
    assert text["card-e2el"] == " E2EL p50 91.5 ms p99 110 ms end-to-end latency"
    assert text["card-preemptions"] == " Preemptions 1"
    assert text["card-swap"] == " Swap traffic 0 GiB"
    assert text["card-rejected"] == " Rejected 1 of 3 requests: 1 prompt_too_long"  # C, by reason
    assert text["card-aborted"] == " Aborted 0"


def test_the_header_gives_the_pool_and_its_usable_blocks(page: str) -> None:
    """vllm_v1 reserves vLLM 0.11's null block: the header says how many blocks are usable."""
    assert "<dt>KV pool</dt><dd>4 blocks × 4 tokens (3 usable beside the null block)</dd>" in page


def test_same_folder_renders_identical_bytes(run_dir: Path, page: str) -> None:
    path = write_run_report(run_dir)  # a second, independent render
    assert path == run_dir / "report.html"
    assert path.read_bytes() == page.encode("utf-8")


def test_report_references_nothing_outside_itself(page: str) -> None:
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:[a-z]+:)?//""", page, re.I)
    assert not re.search(r"""url\(\s*["']?\s*(?:[a-z]+:)?//""", page, re.I)
    assert "@import" not in page
    assert "<script" not in page.lower()
    assert "<link" not in page.replace('<link rel="icon" href="data:,">', "")


def test_script_in_trace_path_is_escaped(page: str) -> None:
    assert EVIL not in page
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;.csv"
    assert page.count(escaped) == 2  # header setup line and the resolved config


def test_resolved_config_and_summary_are_complete(run_dir: Path, page: str) -> None:
    pre = re.search(r'<pre id="resolved-config">(.*?)</pre>', page, re.S)
    assert pre is not None
    assert html.unescape(pre.group(1)) == (run_dir / "config.resolved.yaml").read_text()
    table = re.search(r'<table id="summary-table">(.*?)</table>', page, re.S)
    assert table is not None
    keys = re.findall(r"<tr><td>([a-z0-9_]+)</td>", table.group(1))
    summary = load_run(run_dir).summary
    assert keys == list(summary)
    row = '<tr><td>preemptions</td><td class="num">1</td><td class="note"></td></tr>'
    assert row in table.group(1)
    # a metric whose name misleads says what it counts
    note = re.search(r"<tr><td>prefix_hit_rate</td><td class=\"num\">[^<]*</td>"
                     r"<td class=\"note\">([^<]*)</td>", table.group(1))  # fmt: skip
    assert note is not None
    assert html.unescape(note.group(1)).startswith("prompt tokens found cached at each request's")


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(InputError) as err:
        render_run_report(tmp_path)
    missing = "requests.parquet, steps.parquet, itl.parquet, config.resolved.yaml"
    assert str(err.value) == f"{tmp_path}: not a simkv run folder: missing {missing}"


def test_comparison_overlays_runs(tmp_path: Path) -> None:
    a = build_tiny_run(tmp_path / "a")
    b = build_tiny_run(tmp_path / "b", num_blocks=8)
    page = render_comparison_report([a, b])
    assert page == render_comparison_report([a, b])
    assert list(_outline(page).figures) == [
        "fig-cmp-latency-cdf", "fig-cmp-throughput", "fig-cmp-kv-usage",
        "fig-cmp-waste-breakdown",
    ]  # fmt: skip
    # headline cards: the second run against the first, coloured by the metric's direction
    card = re.search(r'<div class="card cmp" id="cmp-card-preemptions">(.*?)</div>\n</div>',
                     page, re.S)  # fmt: skip
    assert card is not None
    assert '<span class="value">0</span>\n<span class="delta better">−1 (−100%)</span>' in (
        card.group(1)
    )
    # the config diff: only keys whose values differ (the KV pool; the trace and the step table
    # live in each run's own folder)
    diff = re.search(r'<table id="config-diff">(.*?)</table>', page, re.S)
    assert diff is not None
    assert re.findall(r"<tr><td>([a-z_.]+)</td>", diff.group(1)) == [
        "workload.path", "kv_cache.num_blocks", "cost_model.path",
    ]  # fmt: skip
    assert "<tr><td>kv_cache.num_blocks</td><td>4</td><td>8</td></tr>" in diff.group(1)
    # both runs are named "tiny" and live in folders named "run": the labels are numbered
    assert "<th>metric</th><th>1. tiny</th><th>2. tiny</th>" in page
    assert '<tr><td>preemptions</td><td class="num">1</td><td class="num">0</td></tr>' in page
    assert EVIL not in page
    with pytest.raises(InputError):
        render_comparison_report([])


def test_format_ms() -> None:
    values = (None, float("nan"), 7.5, 185.7, 999.4, 7208.6, 9_999.4, 10_000.0, 72_675.0,
              1_609_216.0)  # fmt: skip
    assert [format_ms(v) for v in values] == [
        "—", "—", "7.5 ms", "186 ms", "999 ms", "7,209 ms", "9,999 ms", "10 s", "72.7 s",
        "1,609 s",
    ]  # fmt: skip


def test_bin_steps_sums_events_and_weights_states() -> None:
    steps = pd.DataFrame({c: [0, 0, 0] for c in STEP_COLUMNS})
    steps["time_s"] = [0.0, 1.0, 3.0]
    steps["duration_s"] = [1.0, 1.0, 1.0]
    steps["prefill_tokens"] = [10, 20, 30]
    steps["batch_size"] = [1, 2, 4]
    # two equal bins over [0, 4]: steps 0 and 1 in [0, 2), step 2 in [2, 4)
    two = fg.bin_steps(steps, max_bins=2)
    assert two["start_s"].tolist() == [0.0, 2.0]
    assert two["end_s"].tolist() == [2.0, 4.0]
    assert two["prefill_tokens_per_s"].tolist() == [15.0, 15.0]
    assert two["batch_size"].tolist() == [1.5, 4.0]
    # few steps: one bin per step, running to the next step's start
    each = fg.bin_steps(steps, max_bins=3)
    assert each["prefill_tokens_per_s"].tolist() == [10.0, 10.0, 30.0]
    assert each["batch_size"].tolist() == [1.0, 2.0, 4.0]


def test_bin_steps_carries_states_over_empty_bins() -> None:
    steps = pd.DataFrame({c: [0, 0, 0] for c in STEP_COLUMNS})
    steps["time_s"] = [0.0, 0.1, 0.2]
    steps["duration_s"] = [0.1, 0.1, 3.8]
    steps["num_waiting"] = [2, 2, 5]
    steps["decode_tokens"] = [1, 1, 1]
    binned = fg.bin_steps(steps, max_bins=2)  # all three steps start in [0, 2)
    # (0.1·2 + 0.1·2 + 3.8·5) / 4 s of steps; the empty bin carries it forward
    assert binned["num_waiting"].tolist() == pytest.approx([4.85, 4.85])
    assert binned["decode_tokens_per_s"].tolist() == [1.5, 0.0]
    assert fg.bin_steps(steps.iloc[:0]).empty


def test_cdf_points_weighted_and_downsampled() -> None:
    x, y = fg.cdf_points(np.array([3.0, 1.0, 2.0, 9.0]), np.array([1, 2, 1, 0]))
    assert x.tolist() == [1.0, 2.0, 3.0]
    assert y.tolist() == [0.5, 0.75, 1.0]
    x, y = fg.cdf_points(np.arange(10.0), np.ones(10, dtype=np.int64), max_points=3)
    assert x.tolist() == [0.0, 4.0, 9.0]
    assert y.tolist() == pytest.approx([0.1, 0.5, 1.0])


def _large_run(run_dir: Path, tiny: Path, num_steps: int = 300_000) -> Path:
    """Synthetic frames of a long run (values are random, shapes are real)."""
    rng = np.random.default_rng(7)
    steps = pd.DataFrame({c: rng.integers(0, 100, num_steps) for c in STEP_COLUMNS[2:]})
    duration = rng.uniform(0.005, 0.03, num_steps)
    steps.insert(0, "duration_s", duration)
    steps.insert(0, "time_s", np.concatenate(([0.0], np.cumsum(duration)[:-1])))
    requests = pd.read_parquet(tiny / "requests.parquet")
    requests = requests.sample(20_000, replace=True, random_state=1, ignore_index=True)
    requests["first_token_s"] = requests["arrival_s"] + rng.exponential(0.5, len(requests))
    requests["finish_s"] = requests["first_token_s"] + rng.exponential(10, len(requests))
    requests["status"] = "finished"
    itl = pd.DataFrame({"itl_s": rng.exponential(0.03, num_steps),
                        "count": rng.integers(1, 50, num_steps)})  # fmt: skip
    run_dir.mkdir()
    for name, frame in (("steps", steps), ("requests", requests), ("itl", itl)):
        frame.to_parquet(run_dir / f"{name}.parquet", index=False)
    for name in ("summary.json", "config.resolved.yaml"):
        (run_dir / name).write_bytes((tiny / name).read_bytes())
    return run_dir


def test_long_run_gives_a_small_file(run_dir: Path, tmp_path: Path) -> None:
    """300k steps are binned into a bounded page (render time is benchmarks' business)."""
    big = _large_run(tmp_path / "big", run_dir)
    page = render_run_report(big)
    assert list(_outline(page).figures) == FIGURE_IDS
    assert "(2,000 time bins over 300,000 engine steps)" in page
    assert len(page.encode()) < 2_000_000


def test_runs_without_prefix_caching_have_no_cache_items(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, [(0.0, 4, 3), (0.0, 5, 2)], {"kind": "vllm_v0"}, num_blocks=8)
    write_run(simulate(cfg, tmp_path), tmp_path / "run")
    page = render_run_report(tmp_path / "run")
    assert 'id="fig-queues"' in page
    assert "fig-prefix-cache" not in page and "card-prefix-hits" not in page


def test_the_verdict_leads_the_report(tmp_path: Path) -> None:
    from simkv.config.sections import SLOConfig

    cfg = tiny_config(tmp_path, [(0.0, 4, 6), (0.0, 4, 4)], {"kind": "vllm_v1"}, num_blocks=4,
                      max_model_len=12)  # fmt: skip
    # TTFT 18 ms for both; E2EL 73 ms (A) and 110 ms (B): the E2EL objective fails and binds
    cfg = cfg.model_copy(update={"slo": SLOConfig(ttft_ms=20, e2el_ms=100)})
    write_run(simulate(cfg, tmp_path), tmp_path / "run")
    page = render_run_report(tmp_path / "run")
    verdict = page[page.index('<ul class="verdict" id="slo-verdict">') : page.index("</ul>")]
    marked = re.findall(r'<li class="(\w+)">(.*?)</li>', verdict)
    assert '<b data-answer="slo_ttft_pass">PASS</b>' in marked[0][1]  # the answers, marked
    assert '<b data-answer="p99_e2el_ms">' in marked[1][1]
    items = [(cls, re.sub(r"<[^>]+>", "", text)) for cls, text in marked]
    assert [cls for cls, _ in items] == ["pass", "fail", "binding"]
    assert items[0][1].startswith("SLO TTFT ≤ 20 ms: PASS, p99 18")
    assert items[1][1].startswith("SLO E2EL ≤ 100 ms: FAIL, p99 1")
    assert items[1][1].endswith("; 50.0 % of completed requests met it")
    assert items[2][1].startswith("Binding SLO: E2EL, p99 ")
    assert page.index('id="slo-verdict"') < page.index('id="summary-cards"')
