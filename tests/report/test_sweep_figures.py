"""Sweep figure conventions: scales, coinciding lines, reference lines, tick and point labels."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from simkv.report import conventions as cv
from simkv.report import figures as fg
from simkv.report import sweep_figures as sf
from simkv.report import sweep_scales as sc
from simkv.report.label_layout import place_point_labels
from simkv.report.sweep_folder import load_sweep_folder


def _folder(path: Path, axes: dict[str, list], metrics: dict[str, list[float]]) -> Path:
    path.mkdir()
    n = len(next(iter(axes.values())))
    table = pd.DataFrame({
        "run_id": [f"r{i}" for i in range(n)], "status": ["ok"] * n, "error": [None] * n,
        **axes, **metrics,
    })  # fmt: skip
    table.to_parquet(path / "sweep.parquet", index=False)
    meta = {"name": "t", "axes": list(axes), "runs": list(table["run_id"])}
    (path / "sweep.json").write_text(json.dumps(meta))
    return path


@pytest.mark.parametrize(("values", "expected"), [
    ([8, 16, 32, 64], True), ([12, 24, 48], True), ([1, 2], False), ([1, 2, 3], False),
    ([0, 1, 2, 4], False), ([0.25, 0.5, 1.0], True), (["a", "b", "c"], False),
])  # fmt: skip
def test_power_of_two_grids(values: list, expected: bool) -> None:
    assert sc.is_power_of_two_grid(values) is expected


def test_y_scale_zero_baseline_or_log() -> None:
    with mpl.rc_context(dict(fg.REPORT_RC)):
        ax = Figure().add_subplot()
        assert sc.scale_y(ax, np.array([3.68, 3.71, np.nan])) == ""
        assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0.0
        ax = Figure().add_subplot()
        assert sc.scale_y(ax, np.array([120.0, 300.0, 2.3e6])) == " (log scale)"
        assert ax.get_yscale() == "log"
        ax = Figure().add_subplot()
        assert sc.scale_y(ax, np.array([0.0, 3.0, 5000.0])) == " (symlog scale)"
        assert ax.get_yscale() == "symlog" and ax.get_ylim()[0] == 0.0


def test_an_outlier_within_two_decades_does_not_squash_the_others() -> None:
    """The schedulers sweep's p99 TPOT: static's 760–1,368 ms beside 17–41 ms and a 100 ms
    SLO (under two decades) sat in the bottom tenth of a linear axis; now log, labelled 1-2-5."""
    tpot = np.array([34.3, 36, 36, 37.1, 41.7, 41.7, 17, 24.9, 36, 24.7, 36.1, 36, 28.6, 36.1, 36,
                     760, 989, 1368, 100.0])  # fmt: skip
    assert 10**cv.LOG_DECADES > 1368 / 17 and cv.squashed(tpot)
    assert not cv.squashed(np.array([15.3, 21.2, 30.6, 49.3, 71.3, 94.1, 100.0]))  # rate sweep
    assert not cv.squashed(np.array([0, 0, 0, 17, 129, 197.0]))  # zeros sit on the baseline
    with mpl.rc_context(dict(fg.REPORT_RC)):
        ax = Figure().add_subplot()
        assert sc.scale_y(ax, tpot) == " (log scale)"
        low, high = ax.get_ylim()
        labelled = [
            t for t in ax.yaxis.get_major_locator().tick_values(low, high) if low <= t <= high
        ]
        assert {20.0, 50.0, 100.0, 200.0, 500.0, 1000.0} <= set(labelled)


def test_coinciding_lines_are_named_and_dodged(tmp_path: Path) -> None:
    axes = {"kv_cache.capacity_gib": [12, 24, 48] * 3,
            "kv_cache.prefix_caching": ["none"] * 3 + ["hash"] * 3 + ["radix"] * 3}  # fmt: skip
    hits = [0.0, 0.0, 0.0, 0.035, 0.066, 0.127, 0.035, 0.066, 0.127]
    sweep = load_sweep_folder(_folder(tmp_path / "s", axes, {"prefix_hit_rate": hits}))
    with mpl.rc_context(dict(fg.REPORT_RC)):
        fig = sf.line_figure(sweep, "prefix_hit_rate", "hits", "kv_cache.capacity_gib")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["none", "hash", "radix (= hash)"]
    _, hash_, radix = ax.lines
    assert ax.get_xscale() == "log"  # 12, 24, 48: a log2 axis
    assert hash_.get_xdata().tolist() == [12.0, 24.0, 48.0]
    assert all(r > h for r, h in zip(radix.get_xdata(), hash_.get_xdata(), strict=True))
    assert len({line.get_marker() for line in ax.lines}) == 3
    assert len({str(line.get_linestyle()) for line in ax.lines}) == 3


def test_nearly_equal_lines_are_marked_as_hiding_each_other(tmp_path: Path) -> None:
    axes = {"x": [1, 2, 3] * 3, "policy": ["a"] * 3 + ["b"] * 3 + ["c"] * 3}
    ttft = [140633.0, 76222.0, 27252.0, 140582.0, 75982.0, 27251.0, 9e5, 5e5, 3e5]
    sweep = load_sweep_folder(_folder(tmp_path / "s", axes, {"p99_ttft_ms": ttft}))
    with mpl.rc_context(dict(fg.REPORT_RC)):
        fig = sf.line_figure(sweep, "p99_ttft_ms", "ttft", "x")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b (≈ a)", "c"]
    assert ax.lines[1].get_xdata()[0] > 1.0  # dodged
    assert ax.lines[2].get_xdata().tolist() == [1.0, 2.0, 3.0]


def test_reference_lines_and_thinned_ticks(tmp_path: Path) -> None:
    rates = [1.0, 4.0, 4.02, 4.04, 8.0]
    ttft = {"p99_ttft_ms": [100.0, 200.0, 300.0, 900.0, 5e5]}
    sweep = load_sweep_folder(_folder(tmp_path / "s", {"workload.rate": rates}, ttft))
    marks = sf.Marks(slo=(1000.0,), knees=(("knee 4.02 req/s", 4.02),))
    with mpl.rc_context(dict(fg.REPORT_RC)):
        fig = sf.line_figure(sweep, "p99_ttft_ms", "p99 TTFT (ms)", "workload.rate", marks)
    ax = fig.axes[0]
    _, slo, knee = ax.lines
    assert list(slo.get_ydata()) == [1000.0, 1000.0]
    assert list(knee.get_xdata()) == [4.02, 4.02]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["SLO 1,000 ms", "knee 4.02 req/s"]
    assert ax.get_yscale() == "log"
    assert ax.get_xlabel() == "workload.rate (req/s)"  # the axis names its unit
    ticks = dict(zip(ax.get_xticks(), (t.get_text() for t in ax.get_xticklabels()), strict=True))
    assert ticks[4.02] == "4.02", "the knee has its tick, labelled as the summary says"
    assert ticks[4.0] == "", "a round tick touching the knee's label is blanked, not the knee's"
    assert {t: text for t, text in ticks.items() if t != 4.02 and text} == {
        2.0: "2",
        6.0: "6",
        8.0: "8",
    }, "round ticks, not one per point: the points near the knee do not crowd the axis"


def _label_boxes(fig: Figure) -> list:
    renderer = FigureCanvasAgg(fig).get_renderer()
    ax = fig.axes[0]
    return [t.get_window_extent(renderer) for t in ax.texts], ax.get_window_extent(renderer)


def test_point_labels_never_overlap() -> None:
    rng = np.random.default_rng(3)
    xy = np.vstack([rng.normal(0, 0.05, (30, 2)), [[0.0, 0.0], [0.0, 0.0]], rng.random((10, 2))])
    texts = [str(i + 1) for i in range(len(xy))]
    with mpl.rc_context(dict(fg.REPORT_RC)):
        fig = Figure(figsize=(3, 2))
        ax = fig.add_subplot()
        ax.scatter(xy[:, 0], xy[:, 1])
        fig.tight_layout()
        ax.set_xlim(ax.get_xlim())
        ax.set_ylim(ax.get_ylim())
        unplaced = place_point_labels(ax, xy, texts, fontsize=7)
        boxes, frame = _label_boxes(fig)
    labels = [t.get_text() for t in fig.axes[0].texts] + unplaced
    numbers = sorted(int(n) for label in labels for n in label.split(","))
    assert numbers == list(range(1, len(xy) + 1))  # each point in exactly one label
    assert any({"31", "32"} <= set(label.split(",")) for label in labels)  # equal points share
    assert unplaced, "a crowd of 30 points in a small axes leaves some unlabelled"
    for i, a in enumerate(boxes):
        assert frame.x0 - 0.5 <= a.x0 and a.x1 <= frame.x1 + 0.5
        assert frame.y0 - 0.5 <= a.y0 and a.y1 <= frame.y1 + 0.5
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), f"{a} overlaps {b}"
