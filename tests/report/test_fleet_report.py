"""The fleet section of a run report: cards and figures of a fleet run, the per-replica
table read back (and refused when damaged), figures without overlapping texts."""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
import pytest

from simkv.errors import InputError
from simkv.report import figures as fg
from simkv.report import fleet_figures as ff
from simkv.report.conventions import format_ms, text_overlaps
from simkv.report.replica_table import replica_rows
from simkv.report.run_report import load_run, render_run_report
from simkv.run import simulate, write_run
from tests.engine.helpers import tiny_config
from tests.report.test_run_report import _outline

# two replicas, round robin: A, C on replica 0, B on replica 1
REQUESTS = [(0.0, 4, 6), (0.0, 4, 4), (0.001, 8, 3)]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    fleet = {"router": {"kind": "round_robin"}, "replicas": [{"count": 2}]}
    cfg = tiny_config(root, REQUESTS, {"kind": "vllm_v1"}, num_blocks=8, fleet=fleet)
    write_run(simulate(cfg, root), root / "run")
    return root / "run"


def test_the_report_has_the_fleet_cards_and_figures(run_dir: Path) -> None:
    outline = _outline(render_run_report(run_dir))
    assert {"fig-fleet-time", "fig-fleet-routing"} <= set(outline.figures)
    assert "svg" in outline.figures["fig-fleet-routing"]
    assert outline.text_by_id["card-replicas"].split()[:2] == ["Replicas", "2"]
    assert "round_robin" in outline.text_by_id["card-replicas"]
    assert "max/mean" in outline.text_by_id["card-imbalance"]


def test_the_per_replica_table_is_read_back(run_dir: Path) -> None:
    run = load_run(run_dir)
    assert run.replicas is not None
    assert run.replicas["routed"].tolist() == [2, 1]
    assert run.frames.requests["replica"].tolist() == [0, 1, 0]
    steps = run.frames.steps
    assert set(steps["replica"]) == {0, 1} and steps["time_s"].is_monotonic_increasing


def test_a_damaged_per_replica_table_names_its_file(run_dir: Path, tmp_path: Path) -> None:
    for name in ("requests.parquet", "steps.parquet", "itl.parquet", "summary.json",
                 "config.resolved.yaml"):  # fmt: skip
        (tmp_path / name).write_bytes((run_dir / name).read_bytes())
    (tmp_path / "replicas.json").write_text('[{"replica": 0, "routed": "many"}]')
    with pytest.raises(InputError, match=r"replicas\.json"):
        load_run(tmp_path)


def test_fleet_figures_have_no_overlapping_texts_for_many_replicas() -> None:
    rng = np.random.default_rng(0)
    n, rows = 12, 600
    steps = pd.DataFrame({
        "time_s": np.sort(rng.uniform(0, 100, rows)), "duration_s": np.full(rows, 0.05),
        "blocks_used": rng.integers(0, 100, rows), "blocks_free": np.full(rows, 100),
        "num_waiting": rng.integers(0, 5, rows), "replica": rng.integers(0, n, rows),
    })  # fmt: skip
    table = pd.DataFrame({
        "replica": range(n), "routed": rng.integers(10, 100, n),
        "mean_outstanding": rng.uniform(0, 3, n), "prefix_hit_rate": rng.uniform(0, 1, n),
    })  # fmt: skip
    with mpl.rc_context(dict(fg.REPORT_RC)):
        for drawn in (ff.fleet_time_figure(steps), ff.routing_figure(table)):
            assert drawn.figure is not None and text_overlaps(drawn.figure) == []
        # more than MAX_LINES replicas: three lines (max, median, min), not one per replica
        legend = ff.fleet_time_figure(steps).figure.axes[0].get_legend_handles_labels()[1]
    assert legend == [f"max of {n}", f"median of {n}", f"min of {n}"]


def test_replica_series_weights_by_duration_and_carries_forward() -> None:
    steps = pd.DataFrame({
        "time_s": [0.0, 0.5, 0.2], "duration_s": [0.1, 0.3, 0.1], "blocks_used": [0, 0, 0],
        "blocks_free": [1, 1, 1], "num_waiting": [2, 6, 4], "replica": [0, 0, 1],
    })  # fmt: skip
    series = ff.replica_series(steps, "num_waiting", np.array([0.0, 0.4, 0.8, 1.2]))
    # replica 0: bin 0 holds 2 (0.1 s); bin 1 holds 6; bin 2 carries 6 forward
    # replica 1: bin 0 holds 4, carried forward
    assert series.tolist() == [[2.0, 6.0, 6.0], [4.0, 4.0, 4.0]]


def test_the_header_names_the_fleet_and_whose_pool_it_shows(run_dir: Path) -> None:
    """A fleet's header gives its replicas' GPUs, not the top level's alone."""
    html = render_run_report(run_dir)
    assert "<dt>fleet</dt><dd>2 × a100-80gb TP1</dd>" in html
    assert "(replica 0)</dd>" in html


def test_bars_name_each_replica_by_group_and_gpu(run_dir: Path) -> None:
    run = load_run(run_dir)
    assert run.replicas is not None
    with mpl.rc_context(dict(fg.REPORT_RC)):
        fig = ff.routing_figure(run.replicas).figure
    assert fig is not None
    labels = [t.get_text() for t in fig.axes[-1].get_xticklabels()]
    group = run.replicas["group"].iloc[0]
    assert labels == [f"r0 · {group}\na100-80gb TP1", f"r1 · {group}\na100-80gb TP1"]
    assert text_overlaps(fig) == []


def test_the_per_replica_table_is_computed_from_the_requests(run_dir: Path) -> None:
    """Rows from the requests frame agree with the engine's own per-replica record."""
    run = load_run(run_dir)
    assert run.replicas is not None
    rows = replica_rows(run.frames.requests, run.replicas)
    assert [(r.replica, r.gpu) for r in rows] == [("r0", "a100-80gb TP1"), ("r1", "a100-80gb TP1")]
    assert [r.cells[0] for r in rows] == ["2", "1"]  # A, C on replica 0; B on replica 1
    for row, (_, info) in zip(rows, run.replicas.iterrows(), strict=True):
        assert row.cells[3] == format_ms(info["p99_ttft_ms"])
        assert row.cells[4] == format_ms(info["p99_tpot_ms"])
    html = render_run_report(run_dir)
    table = html[html.index('<table id="replica-table">') :]
    assert "<th>p99 TTFT</th>" in table and '<td class="num">' + rows[1].cells[2] in table


def test_a_fleet_without_disaggregation_has_no_prefill_decode_section(run_dir: Path) -> None:
    page = render_run_report(run_dir)
    absent = ("fig-pd-", "card-remote-prefill", "card-kv-moved", "card-link-busy",
              "Prefill/decode", "<th>role</th>", "<th>KV moved</th>", "Bars by role")  # fmt: skip
    assert [text for text in absent if text in page] == []
    assert "fig-fleet-routing" in page and '<table id="replica-table">' in page
