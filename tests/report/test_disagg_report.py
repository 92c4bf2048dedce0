"""The prefill/decode section of a run report: cards, where TTFT goes, the transfers over time,
the per-replica table grouped by role, and the page laid out in a real browser."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
import pytest

from simkv.metrics.disagg import TTFT_PARTS
from simkv.report import figures as fg
from simkv.report import fleet_figures as ff
from simkv.report.conventions import text_overlaps
from simkv.report.disagg_figures import mean_in_intervals, ttft_split_figure
from simkv.report.replica_table import replica_headers, replica_rows
from simkv.report.run_report import load_run, render_run_report, write_run_report
from simkv.run import load_config, simulate, write_run
from tests.conftest import ROOT
from tests.report.chromium import WINDOW, chromium_tab, page_problems, require_chromium
from tests.report.page_checks import LEGEND_JS, WRAP_JS
from tests.report.test_layout import OVERFLOWS_JS, OVERLAPS_JS
from tests.report.test_run_report import _outline

PD_FIGURES = ["fig-pd-ttft", "fig-pd-transfers"]
PD_CARDS = ["card-remote-prefill", "card-kv-moved", "card-link-busy"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """configs/disagg.yaml (2 prefill + 2 decode replicas) shrunk to 200 requests."""
    path = ROOT / "configs" / "disagg.yaml"
    out = tmp_path_factory.mktemp("disagg") / "run"
    write_run(simulate(load_config(path, ["workload.num_requests=200"]), path.parent), out)
    write_run_report(out)
    return out


def test_the_report_has_the_prefill_decode_cards_and_figures(run_dir: Path) -> None:
    page = render_run_report(run_dir)
    outline = _outline(page)
    shown = [fig_id for fig_id in outline.figures if not fig_id.startswith("fig-dist-")]
    assert shown[-3:] == ["fig-fleet-routing", *PD_FIGURES]  # after the fleet's figures
    for fig_id in PD_FIGURES:
        assert {"svg", "figcaption"} <= outline.figures[fig_id]
        assert f'<a href="#{fig_id}">' in page
    summary = json.loads((run_dir / "summary.json").read_text())
    cards = {card: outline.text_by_id[card] for card in PD_CARDS}
    assert f"{summary['remote_prefill_frac']:.1%}" in cards["card-remote-prefill"]
    assert f"{summary['kv_transfer_bytes'] / 1e9:.3g} GB" in cards["card-kv-moved"]
    assert f"{summary['kv_transfers']:,} transfers over ib_ndr" in cards["card-kv-moved"]
    assert f"{summary['link_busy_frac']:.1%}" in cards["card-link-busy"]


def test_the_ttft_bar_is_the_summary_split() -> None:
    summary = {f"mean_ttft_{part}_ms": float(i + 1) for i, part in enumerate(TTFT_PARTS)}
    with mpl.rc_context(dict(fg.REPORT_RC)):
        drawn = ttft_split_figure(summary)
        assert drawn.figure is not None and text_overlaps(drawn.figure) == []
        ax = drawn.figure.axes[0]
        bars = [(p.get_x(), p.get_width()) for p in ax.patches]
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        texts = [t.get_text() for t in ax.texts]
    assert bars == [(0.0, 1.0), (1.0, 2.0), (3.0, 3.0), (6.0, 4.0), (10.0, 5.0), (15.0, 6.0)]
    assert legend[2] == "KV wait 3 ms" and texts == ["total 21 ms"]
    missing = ttft_split_figure({**summary, "mean_ttft_transfer_ms": None})
    assert missing.figure is None and missing.notes == ("no request was prefilled remotely",)


def test_requests_in_flight_are_time_averaged_per_bin() -> None:
    # [0, 1) and [0.5, 2.5) over bins [0, 1), [1, 2), [2, 4): 1.5, 1, 0.25; NaN: never sent
    start, end = np.array([0.0, 0.5, np.nan]), np.array([1.0, 2.5, np.nan])
    got = mean_in_intervals(start, end, np.array([0.0, 1.0, 2.0, 4.0]))
    assert np.allclose(got, [1.5, 1.0, 0.25])


def test_the_per_replica_table_groups_the_pools(run_dir: Path) -> None:
    run = load_run(run_dir)
    assert run.replicas is not None
    # listed decode first: the table still shows the prefill pool first
    shuffled = run.replicas.assign(role=["decode", "prefill", "decode", "prefill"])
    rows = replica_rows(run.frames.requests, shuffled)
    assert [(r.replica, r.role) for r in rows] == [
        ("r1", "prefill"), ("r3", "prefill"), ("r0", "decode"), ("r2", "decode"),
    ]  # fmt: skip
    headers = replica_headers(run.replicas)
    assert headers[:4] == ("replica", "group", "role", "GPU") and headers[-1] == "KV moved"
    rows = replica_rows(run.frames.requests, run.replicas)
    prefilled = run.frames.requests["prefill_replica"].value_counts()
    for row in rows:
        r = int(row.replica.removeprefix("r"))
        assert len(row.cells) == len(headers) - 4
        if row.role == "prefill":  # its prefills counted, no TPOT of its own
            assert row.cells[0] == f"{prefilled[r]:,}" and row.cells[4] == "—"
        else:
            assert row.cells[4] != "—"
    page = render_run_report(run_dir)
    assert "<th>role</th>" in page and "<td>prefill</td>" in page


def test_the_replica_figures_name_and_colour_the_roles(run_dir: Path) -> None:
    run = load_run(run_dir)
    assert run.replicas is not None
    named = run.replicas.assign(group=["fast", "fast", "decode", "decode"])
    with mpl.rc_context(dict(fg.REPORT_RC)):
        fig = ff.routing_figure(named).figure
        assert fig is not None and text_overlaps(fig) == []
        labels = [t.get_text().split("\n")[0] for t in fig.axes[-1].get_xticklabels()]
        colours = {tuple(p.get_facecolor()) for p in fig.axes[0].patches}
        lines = ff.fleet_time_figure(run.frames.steps, named).figure
        assert lines is not None
        legend = lines.axes[0].get_legend_handles_labels()[1]
    assert labels == ["r0 · fast (prefill)", "r1 · fast (prefill)", "r2 · decode", "r3 · decode"]
    assert legend == labels and len(colours) == 2


def test_the_prefill_decode_section_lays_out_in_chromium(run_dir: Path, tmp_path: Path) -> None:
    """No text overlaps or is cut, nothing is wider than the page, no legend covers a line,
    no cell wraps a word; a screenshot of the section is kept beside the run."""
    require_chromium()
    found: list[str] = []
    with chromium_tab(tmp_path / "profile", 60.0) as tab:
        found += page_problems(tab.open(run_dir / "report.html"))
        for check in (OVERLAPS_JS, OVERFLOWS_JS, LEGEND_JS, WRAP_JS):
            found += json.loads(tab.value(check))
        sizes = json.loads(tab.value(
            "JSON.stringify(['fig-pd-ttft', 'fig-pd-transfers', 'replica-table'].map(id => {"
            "const box = document.getElementById(id).getBoundingClientRect();"
            "return [box.width, box.height];}))"
        ))  # fmt: skip
        tab.value("document.getElementById('fig-pd-ttft').scrollIntoView()")
        (run_dir / "pd-section.png").write_bytes(tab.screenshot())
    assert found == [], "\n".join(found)
    for width, height in sizes:
        assert 100 < width <= WINDOW[0] and height > 50


def test_the_section_follows_the_requests_frame() -> None:
    """Only a requests frame with ``prefill_replica`` makes a disaggregated report."""
    from simkv.report.disagg_figures import is_disaggregated

    assert is_disaggregated(pd.DataFrame({"prefill_replica": [-1]}))
    assert not is_disaggregated(pd.DataFrame({"replica": [0]}))
