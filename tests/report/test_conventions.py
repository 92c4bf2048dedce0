"""The figure conventions (simkv.report.conventions) and the figures drawn to them: compact
tick labels, no overlapping texts in any figure of a real run, panels left out with a note,
offered load and prefix-cache hits split by hand."""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from simkv.report import conventions as cv
from simkv.report import figures as fg
from simkv.report import time_figures as tf
from simkv.report.cache_figures import hit_split, prefix_cache_figure
from simkv.report.compare_runs import comparison_figures, config_diff, flatten
from simkv.report.run_report import load_run, run_figures
from tests.report.test_run_report import build_tiny_run


def test_compact_numbers_are_at_most_six_characters() -> None:
    cases = {0: "0", 0.05: "0.05", 0.125: "0.125", 2.5: "2.5", 12.5: "12.5", 950: "950",
             1000: "1k", 1200: "1.2k", 15_000: "15k", 1_500_000: "1.5M", 7.5e9: "7.5G",
             -2500: "-2.5k", 999.9: "1k", 0.0125: "0.0125", 2.25: "2.25"}  # fmt: skip
    assert {v: cv.compact_number(v) for v in cases} == cases
    # every tick MaxNLocator can place (steps 1, 2, 2.5, 5 and their multiples) from 1e-3 up
    for step in (1, 2, 2.5, 5):
        for exponent in range(-3, 13):
            for k in range(1, 10):
                value = k * step * 10.0**exponent
                assert len(cv.compact_number(value)) <= 6, value


def test_text_overlaps_finds_texts_on_top_of_each_other() -> None:
    with mpl.rc_context(dict(fg.REPORT_RC)):
        fig = Figure(figsize=(4, 3))
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "one label")
        ax.text(0.52, 0.5, "another label")
        assert cv.text_overlaps(fig) == [("one label", "another label")]
        ax.texts[1].set_position((0.95, 0.5))
        assert cv.text_overlaps(fig) == [("another label", "figure edge")]
        # matplotlib's own log labels are mathtext strings: drawn raw (parse_math off), they
        # are long enough to collide, as they did before the conventions
        ax.set_xscale("log")
        ax.set_xlim(20, 900)
        assert len(cv.text_overlaps(fig)) > 1


def test_legend_overlaps_finds_a_legend_over_a_line() -> None:
    with mpl.rc_context(dict(fg.REPORT_RC)):
        fig = Figure(figsize=(6, 3))
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1], label="rising")
        cv.slo_line(ax, 0.97, "SLO")  # a vertical line at the right edge
        ax.legend(loc="lower right")  # where the CDF legend stood: over the SLO line
        assert cv.legend_overlaps(fig) == [("rising", "SLO")]
        ax.legend(loc="center")  # over the rising line's middle
        assert ("rising", "rising") in cv.legend_overlaps(fig)
        cv.legend_beside(ax)
        assert cv.legend_overlaps(fig) == []


def test_a_cdf_legend_sits_above_the_panels_clear_of_the_slo_lines() -> None:
    rng = np.random.default_rng(0)
    samples = {k: (rng.uniform(5, 900, 50), np.ones(50, np.int64)) for k in ("ttft", "tpot")}
    samples |= {k: (np.zeros(0), np.zeros(0, np.int64)) for k in ("itl", "e2el")}
    slo = {"ttft_ms": 900.0, "tpot_ms": 70_000.0}
    with mpl.rc_context(dict(fg.REPORT_RC)):
        for runs in ([("one", samples)], [("one", samples), ("two", samples)]):
            fig = fg.latency_cdf_figure(runs, slo).figure
            assert fig is not None and fig.legends and cv.legend_overlaps(fig) == []
            assert cv.text_overlaps(fig) == []
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["one", "two", "TTFT SLO ≤ 900 ms", "TPOT SLO ≤ 70 s"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("conventions"))


def test_no_figure_of_a_run_or_a_comparison_has_overlapping_texts(
    tiny_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[tuple[str, Figure]] = []
    svg_of = fg.svg_of

    def keep(fig: Figure, fig_id: str) -> str:
        drawn.append((fig_id, fig))
        return svg_of(fig, fig_id)

    monkeypatch.setattr(fg, "svg_of", keep)
    run = load_run(tiny_run)
    with mpl.rc_context(dict(fg.REPORT_RC)):
        blocks = run_figures(run)
        # a long name: the waste bars' rotated labels need a deeper margin
        blocks += comparison_figures(["a run with a long name", "b"], [run, run])
        assert [fig_id for fig_id, _ in drawn] == [b.id for b in blocks if b.svg is not None]
        assert len(drawn) == len(blocks) - 1  # the prefix-cache figure is left out (no hits)
        for fig_id, fig in drawn:
            assert cv.text_overlaps(fig) == [], fig_id
            assert cv.legend_overlaps(fig) == [], fig_id


def _steps(n: int, **columns: list[float]) -> pd.DataFrame:
    from simkv.metrics.recorder import STEP_COLUMNS

    steps = pd.DataFrame({c: np.zeros(n) for c in STEP_COLUMNS})
    steps["time_s"] = np.arange(n, dtype=np.float64)
    steps["duration_s"] = 1.0
    for name, values in columns.items():
        steps[name] = values
    return steps


def test_offered_load_counts_arrivals_and_completions_per_bin() -> None:
    edges = np.array([0.0, 2.0, 4.0])
    requests = pd.DataFrame({
        "arrival_s": [0.0, 0.5, 1.0, 3.0], "prompt_tokens": [10, 20, 30, 40],
        "status": ["finished", "finished", "rejected", "finished"],
        "finish_s": [1.5, 3.5, np.nan, 3.9],
    })  # fmt: skip
    load = tf.offered_load(requests, edges)
    assert load["arrived"].tolist() == [1.5, 0.5]  # 3 then 1 arrivals over 2 s bins
    assert load["prompt_tokens"].tolist() == [30.0, 20.0]
    assert load["finished"].tolist() == [0.5, 1.0]  # the rejected request never finishes


def test_queue_panels_only_for_what_happened() -> None:
    quiet = fg.bin_steps(_steps(4, num_running=[1, 1, 1, 0]))
    busy = fg.bin_steps(_steps(4, num_running=[1, 1, 1, 0], preempted=[0, 1, 0, 0],
                               swap_out_blocks=[0, 2, 0, 0]))  # fmt: skip
    with mpl.rc_context(dict(fg.REPORT_RC)):
        left = tf.queue_figure(quiet, block_bytes=1 << 20)
        both = tf.queue_figure(busy, block_bytes=1 << 20)
    assert left.figure is not None and len(left.figure.axes) == 1
    assert left.notes == ("no preemptions in this run", "no swapping in this run")
    assert both.figure is not None and len(both.figure.axes) == 3 and both.notes == ()


def test_prefix_hits_split_into_shared_prefixes_and_rehits() -> None:
    requests = pd.DataFrame({"prefix_hit_tokens": [0, 32, 0], "cache_hit_tokens": [48, 32, 0],
                             "first_scheduled_s": [0.0, 1.0, 2.0]})  # fmt: skip
    assert hit_split(requests) == (32, 48)
    with mpl.rc_context(dict(fg.REPORT_RC)):
        none = prefix_cache_figure(fg.bin_steps(_steps(3)), requests.iloc[2:], block_size=16)
    assert none.figure is None
    assert none.notes[0].startswith("no prefix-cache hits in this run")


def test_kv_memory_is_drawn_in_percent_of_the_pool() -> None:
    steps = _steps(2, token_slots=[30, 60], free_slots=[70, 40])
    with mpl.rc_context(dict(fg.REPORT_RC)):
        fig = tf.kv_memory_figure(fg.bin_steps(steps), pool_bytes=3 << 30).figure
    assert fig is not None
    (ax,) = fig.axes
    assert ax.get_ylim() == (0, 100)
    assert ax.get_ylabel() == "KV pool (%; 100 % = 3 GiB)"


def test_config_diff_keeps_only_differing_keys() -> None:
    assert flatten({"a": {"b": 1, "c": None, "d": True}, "e": []}) == {
        "a.b": "1", "a.c": "null", "a.d": "true", "e": "[]",
    }  # fmt: skip

    class Run:
        def __init__(self, config: dict) -> None:  # type: ignore[type-arg]
            self.config = config

    runs = [Run({"x": 1, "y": {"z": 2}}), Run({"x": 1, "y": {"z": 3}, "w": 4})]
    assert config_diff(runs) == [("y.z", ["2", "3"]), ("w", ["—", "4"])]  # type: ignore[arg-type]
