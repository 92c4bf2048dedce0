"""The sweep report, on hand-written sweep folders (no simulation).

The 2 × 3 grid: block size 8/16/32 × preemption mode ``recompute``/EVIL (an axis value that is
markup). (request_throughput, p99_ttft_ms) per run:

    bs8-rec  (1.0, 500)   dominated by bs16-rec
    bs8-evil (1.2, 700)   dominated by bs32-evil (same throughput, lower latency)
    bs16-rec (1.1, 400)   front: only bs32-rec is faster, and it has less throughput
    bs16-evil  failed; its row carries (99.0, 1.0), which would dominate everything if drawn
    bs32-rec (0.9, 300)   front: lowest latency
    bs32-evil(1.2, 650)   front: highest throughput, lowest latency among those
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
import pytest

from simkv.errors import InputError
from simkv.report import figures as fg
from simkv.report import sweep_report as sr

EVIL = "<script>alert(1)</script>"
BS, MODE = "kv_cache.block_size", "preemption.mode"
LINE_IDS = ["fig-sweep-request-throughput", "fig-sweep-p99-ttft-ms", "fig-sweep-p99-tpot-ms",
            "fig-sweep-preemptions", "fig-sweep-mean-token-frac"]  # fmt: skip
ROWS = [  # run_id, status, error, bs, mode, throughput, p99 ttft
    ("bs8-rec", "ok", None, 8, "recompute", 1.0, 500.0),
    ("bs8-evil", "ok", None, 8, EVIL, 1.2, 700.0),
    ("bs16-rec", "ok", None, 16, "recompute", 1.1, 400.0),
    ("bs16-evil", "failed", f"ValueError: {EVIL}", 16, EVIL, 99.0, 1.0),
    ("bs32-rec", "ok", None, 32, "recompute", 0.9, 300.0),
    ("bs32-evil", "ok", None, 32, EVIL, 1.2, 650.0),
]


def _write(path: Path, axes: dict[str, pd.Series], rows: list[tuple], name: str = "grid") -> Path:
    path.mkdir()
    n = len(rows)
    table = pd.DataFrame({
        "run_id": pd.Series([r[0] for r in rows], dtype="str"),
        "status": pd.Series([r[1] for r in rows], dtype="str"),
        "error": pd.Series([r[2] for r in rows], dtype="str"),
        **axes,
        "request_throughput": [r[-2] for r in rows],
        "output_throughput": [100.0 * r[-2] for r in rows],
        "request_goodput": [float("nan")] * n,
        "median_ttft_ms": [r[-1] / 2 for r in rows],
        "p99_ttft_ms": [r[-1] for r in rows],
        "p99_tpot_ms": [10.0 + i for i in range(n)],
        "p99_e2el_ms": [1000.0 + i for i in range(n)],
        "preemptions": pd.Series([3 * i for i in range(n)], dtype="Int64"),
        "swap_gib": [0.5] * n,
        "mean_kv_usage": [0.8] * n,
        "mean_token_frac": [0.7] * n,
    })  # fmt: skip
    table.to_parquet(path / "sweep.parquet", index=False)
    meta = {"name": name, "axes": list(axes), "runs": [r[0] for r in rows]}
    (path / "sweep.json").write_text(json.dumps(meta))
    return path


@pytest.fixture
def grid_dir(tmp_path: Path) -> Path:
    axes = {
        BS: pd.Series([r[3] for r in ROWS], dtype="Int64"),
        MODE: pd.Series([r[4] for r in ROWS], dtype="str"),
    }
    return _write(tmp_path / "grid", axes, ROWS)


@pytest.fixture
def variant_dir(tmp_path: Path) -> Path:
    rows = [("a", "ok", None, 0, 0, 1.0, 50.0), ("b", "ok", None, 0, 0, 2.0, 60.0),
            ("c", "ok", None, 0, 0, 1.5, 40.0)]  # fmt: skip
    axes = {"variant": pd.Series(["v1", "static", "orca"], dtype="str")}
    return _write(tmp_path / "variants", axes, rows, name="schedulers")


def _figure_ids(text: str) -> list[str]:
    return re.findall(r'<figure id="([^"]+)"', text)


def test_pareto_mask_by_hand() -> None:
    ok = [r for r in ROWS if r[1] == "ok"]
    thr = np.array([r[5] for r in ok])
    lat = np.array([r[6] for r in ok])
    assert sr.pareto_mask(thr, lat).tolist() == [False, False, True, True, True]
    # NaN never on the front nor dominating; equal points share the front
    mask = sr.pareto_mask(np.array([1.0, 1.0, np.nan, 0.5]), np.array([2.0, 2.0, 0.1, 3.0]))
    assert mask.tolist() == [True, True, False, False]


def test_grid_report_figures_and_table(grid_dir: Path) -> None:
    text = sr.render_sweep_report(grid_dir)
    # goodput is all null: no goodput chart
    assert _figure_ids(text) == [*LINE_IDS, "fig-sweep-heatmap", "fig-sweep-pareto"]
    assert text.count("<figcaption>") == 7
    assert "simkv sweep report: grid" in text
    assert f"<dt>{BS}</dt><dd>8, 16, 32</dd>" in text
    body = text[text.index('<table id="runs-table">') :]
    assert body.count('<tr class="ok">') == 5
    assert body.count('<tr class="failed">') == 1
    failed = re.search(r'<tr class="failed">(.*?)</tr>', body)
    assert failed is not None
    assert '<td class="num" title="runs/bs16-evil">4</td><td>16</td>' in failed.group(1)
    assert "<td>ValueError: &lt;script&gt;alert(1)&lt;/script&gt;</td>" in failed.group(1)
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))


def test_markup_is_escaped(grid_dir: Path) -> None:
    text = sr.render_sweep_report(grid_dir)
    assert EVIL not in text
    assert "<script" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_render_is_byte_stable(grid_dir: Path) -> None:
    first = sr.render_sweep_report(grid_dir)
    path = sr.write_sweep_report(grid_dir)
    assert path == grid_dir / "report.html"
    assert path.read_text(encoding="utf-8") == first
    assert sr.render_sweep_report(grid_dir) == first
    assert "http://" not in first.replace("http://www.w3.org/", "")


def test_failed_run_left_out_of_charts(grid_dir: Path) -> None:
    sweep = sr.load_sweep_folder(grid_dir)
    assert sr.x_axis(sweep) == BS
    with mpl.rc_context(dict(fg.REPORT_RC)):
        line = sr.line_figure(sweep, "request_throughput", "thr", BS)
        heat = sr.heatmap_figure(sweep, "p99_ttft_ms", "ttft", BS)
        pareto = sr.pareto_figure(sweep).figure
    series = [(ln.get_xdata().tolist(), ln.get_ydata().tolist()) for ln in line.axes[0].lines]
    assert series == [([8.0, 16.0, 32.0], [1.0, 1.1, 0.9]), ([8.0, 32.0], [1.2, 1.2])]
    cells = [t.get_text() for t in heat.axes[0].texts]
    assert cells == ["500", "400", "300", "700", "—", "650"]  # rows: recompute, EVIL
    front = pareto.axes[0].lines[0]
    assert front.get_xdata().tolist() == [300.0, 400.0, 650.0]
    assert front.get_ydata().tolist() == [0.9, 1.1, 1.2]
    dominated = pareto.axes[0].collections[0].get_offsets().tolist()
    assert dominated == [[500.0, 1.0], [700.0, 1.2]]


def test_categorical_axis_without_heatmap(variant_dir: Path) -> None:
    text = sr.render_sweep_report(variant_dir)
    assert _figure_ids(text) == [*LINE_IDS, "fig-sweep-pareto"]
    sweep = sr.load_sweep_folder(variant_dir)
    assert sr.x_axis(sweep) == "variant"
    with mpl.rc_context(dict(fg.REPORT_RC)):
        fig = sr.line_figure(sweep, "p99_ttft_ms", "ttft", "variant")
    (line,) = fig.axes[0].lines
    assert line.get_xdata().tolist() == [0.0, 1.0, 2.0]
    assert line.get_ydata().tolist() == [50.0, 60.0, 40.0]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["v1", "static", "orca"]


def test_all_failed_draws_nothing(tmp_path: Path) -> None:
    rows = [("a", "failed", "boom", 0, 0, float("nan"), float("nan"))]
    path = _write(tmp_path / "bad", {"x": pd.Series([1], dtype="Int64")}, rows)
    text = sr.render_sweep_report(path)
    assert _figure_ids(text) == []
    assert 'id="no-figures"' in text
    assert "<td>boom</td>" in text


def test_missing_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"missing sweep\.json"):
        sr.render_sweep_report(tmp_path)


RATES = [1.0, 2.0, 3.0, 4.0]


def _rate_folder(path: Path) -> Path:
    """A rate sweep with SLOs (TTFT 1000 ms, TPOT 50 ms): runs 1–2 meet them, 3 breaks TTFT
    (and departs: 2,400 > 2 × 300 ms), 4 breaks both; run 3 has the highest goodput but fails
    them, run 2 the highest among the runs meeting them."""
    rows = [(f"r{int(r)}", "ok", None, 0, 0, thr, ttft)
            for r, thr, ttft in zip(RATES, [1.0, 2.0, 2.6, 2.7], [300.0, 500.0, 2400.0, 9e5],
                                    strict=True)]  # fmt: skip
    path = _write(path, {"workload.rate": pd.Series(RATES)}, rows, name="rate")
    table = pd.read_parquet(path / "sweep.parquet")
    table["request_goodput"] = [1.0, 2.0, 2.2, 0.1]
    table["p99_tpot_ms"] = [20.0, 30.0, 45.0, 80.0]
    table.to_parquet(path / "sweep.parquet", index=False)
    for run_id in table["run_id"]:
        run = path / "runs" / run_id
        run.mkdir(parents=True)
        (run / "config.resolved.yaml").write_text("name: x\nslo:\n  ttft_ms: 1000.0\n"
                                                  "  tpot_ms: 50.0\n  e2el_ms: null\n")  # fmt: skip
    return path


@pytest.fixture(scope="module")
def rate_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The rate sweep's report, rendered once for the tests that read it."""
    return sr.render_sweep_report(_rate_folder(tmp_path_factory.mktemp("sweeps") / "rate"))


def _captions(text: str) -> dict[str, str]:
    return dict(re.findall(r'<figure id="([^"]+)">.*?<figcaption>(.*?)</figcaption>', text, re.S))


def test_summary_box_names_best_run_slos_and_knee(rate_page: str) -> None:
    box = rate_page[rate_page.index('<section id="sweep-summary">') : rate_page.index("</section>")]
    lines = re.findall(r"<p>(.*?)</p>", box)
    # the answer (the knee) first, its number marked; the best only among the runs meeting
    # the SLOs, not #3
    assert (
        lines[0]
        == 'Knee: the highest workload.rate meeting the SLOs is <b data-answer="knee">2</b> req/s.'
    )
    assert "data-answer" not in " ".join(lines[1:])
    assert lines[1] == ("Best among the 2 runs meeting the SLOs (by request goodput): "
                        "#2 (workload.rate=2), 2.00 req/s goodput, p99 TTFT 500 ms.")  # fmt: skip
    assert lines[2] == ("Runs meeting the SLOs (p99 TTFT ≤ 1,000 ms, p99 TPOT ≤ 50 ms): 2 of 4: "
                        "#1 (workload.rate=1), #2 (workload.rate=2).")  # fmt: skip
    assert "departs" not in box  # the SLOs answer: no second knee


def test_no_best_run_when_none_meets_the_slos(tmp_path: Path) -> None:
    path = _rate_folder(tmp_path / "rate")
    for run in (path / "runs").iterdir():
        (run / "config.resolved.yaml").write_text("name: x\nslo:\n  ttft_ms: 10.0\n")
    page = sr.render_sweep_report(path)
    box = page[page.index('<section id="sweep-summary">') : page.index("</section>")]
    assert "No run meets the SLOs (p99 TTFT ≤ 10 ms), so none is named best." in box
    assert "Best" not in box and "no rate meets the SLOs" in box


def test_a_capacity_search_leads_with_its_answer_alone(tmp_path: Path) -> None:
    path = _rate_folder(tmp_path / "rate")
    (path / "capacity.json").write_text(json.dumps({
        "search": "rate", "outcome": "found", "axis": "workload.rate", "answer_rate": 2.0,
        "simulations": 4, "tolerance": 0.02, "bracket": [2.0, 3.0],
    }))  # fmt: skip
    page = sr.render_sweep_report(path)
    lines = re.findall(r"<p>(.*?)</p>", page[page.index('<section id="sweep-summary">') :])
    answer = '<b data-answer="answer_rate">2</b>'
    assert lines[0].startswith(
        f"Capacity: the highest workload.rate meeting the SLOs is {answer} req/s"
    )
    rest = " ".join(lines[1:3])
    assert "Best" not in rest and "Knee" not in rest  # one answer in the box


def test_slo_and_knee_lines_on_latency_charts(rate_page: str) -> None:
    captions = _captions(rate_page)
    assert "dashed red: the SLO" in captions["fig-sweep-p99-ttft-ms"]
    assert "dashed red: the SLO" in captions["fig-sweep-p99-tpot-ms"]
    assert "dashed red" not in captions["fig-sweep-request-throughput"]
    assert "dotted: the knee" in captions["fig-sweep-request-throughput"]
    assert "fig-sweep-p99-e2el-ms" not in captions  # no E2EL SLO
    assert "fig-sweep-prefix-hit-rate" not in captions  # no run hits the cache


def test_runs_table_numbers_runs_and_marks_slos(rate_page: str) -> None:
    table = rate_page[rate_page.index('<table id="runs-table">') :]
    assert '<th title="p99 of every set SLO within it">SLO met</th>' in table
    assert '<th title="error">' not in table  # no run failed
    assert '<td class="num" title="runs/r3">3</td><td>3</td><td>ok</td><td>no</td>' in table
    assert 'title="workload.rate">workload.rate</th>' in table  # never broken mid-name


def test_run_slos_are_read_and_a_damaged_config_named(tmp_path: Path) -> None:
    path = _rate_folder(tmp_path / "rate")
    sweep = sr.load_sweep_folder(path)
    assert sweep.table["slo_ttft_ms"].tolist() == [1000.0] * 4
    assert sweep.table["slo_e2el_ms"].isna().all()
    config = path / "runs" / "r2" / "config.resolved.yaml"
    config.write_text("slo: [1, 2\n")
    with pytest.raises(InputError, match="not YAML") as err:
        sr.load_sweep_folder(path)
    assert err.value.file == str(config)
