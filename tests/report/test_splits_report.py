"""The split-search page (:mod:`simkv.report.splits_report`) from a hand-written splits.json:
the headline names the best split, its goodput per GPU and per cost and its factor over
colocated; the splits meeting no rate are greyed in the table and crossed in the chart; the
same folder renders to the same bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib as mpl
import pytest

from simkv.errors import InputError
from simkv.report import figures as fg
from simkv.report.conventions import text_overlaps
from simkv.report.splits_figures import MAX_LABELS, SplitBar, splits_figure
from simkv.report.splits_report import render_splits_report, write_splits_report


def _row(name: str, p: int, d: int, tp: tuple[int, int], rate: float | None,
         cost: float) -> dict[str, Any]:  # fmt: skip
    gpus = p * tp[0] + d * tp[1]
    return {
        "name": name, "prefill_replicas": p, "decode_replicas": d, "tp_prefill": tp[0],
        "tp_decode": tp[1], "gpus": gpus, "cost_per_hour": cost, "colocated": p == 0,
        "outcome": "none_meets" if rate is None else "found", "meets": rate is not None,
        "answer_rate": rate, "goodput_per_gpu": None if rate is None else rate / gpus,
        "goodput_per_cost": None if rate is None else rate / cost, "set": [],
    }  # fmt: skip


def write_splits_folder(folder: Path, best: str | None = "p2tp1-d2tp1") -> Path:
    """A split search's folder of six splits at $3 prefill and $2 decode GPU-hours: one meets
    no rate, the best (p2tp1-d2tp1: 12 req/s on $10/h) is 1.5× the best colocated per cost."""
    rows = [
        _row("p1tp1-d3tp1", 1, 3, (1, 1), 9.0, 9.0),
        _row("p2tp1-d2tp1", 2, 2, (1, 1), 12.0, 10.0),
        _row("p1tp1-d1tp2", 1, 1, (1, 2), None, 7.0),
        _row("p2tp1-d1tp2", 2, 1, (1, 2), 6.0, 10.0),
        _row("colocated-5tp1", 0, 5, (1, 1), 8.0, 10.0),
        _row("colocated-2tp2", 0, 2, (2, 2), 4.0, 8.0),
    ]
    folder.mkdir(parents=True)
    (folder / "splits.json").write_text(json.dumps({
        "search": "splits", "gpus": None, "budget_per_hour": 10.0, "currency": "USD",
        "price_per_gpu_hour": {"prefill": 3.0, "decode": 2.0}, "tp_prefill": None,
        "tp_decode": [1, 2], "rate_min": 1.0, "rate_max": 32.0,
        "ranked_by": "goodput_per_cost", "best": best,
        "over_colocated": None if best is None else 1.5, "splits": rows,
    }))  # fmt: skip
    return folder


def test_the_headline_names_the_best_split_per_gpu_per_cost_and_over_colocated(
    tmp_path: Path,
) -> None:
    page = render_splits_report(write_splits_folder(tmp_path / "s"))
    assert ('Best split: p2tp1-d2tp1 (2 prefill × TP 1 + 2 decode × TP 1) serves 12 req/s '
            "within the SLOs on 4 GPUs: 3 req/s per GPU, 1.2 req/s per $/h; 1.50× the best "
            "colocated fleet&#39;s req/s per $/h.") in page  # fmt: skip
    assert '<tr class="best">' in page and page.count(' misses">') == 1
    assert 'id="fig-splits-goodput"' in page and "<svg" in page
    for name in ("p1tp1-d1tp2", "colocated-2tp2"):
        assert f'href="{name}/report.html"' in page


def test_no_split_meeting_says_so_and_the_page_is_deterministic(tmp_path: Path) -> None:
    folder = write_splits_folder(tmp_path / "s", best=None)
    page = render_splits_report(folder)
    assert "No split meets the SLOs: none of the 6 splits met them even at 1 req/s." in page
    assert write_splits_report(folder).read_text() == page == render_splits_report(folder)


def test_a_folder_of_another_search_is_refused(tmp_path: Path) -> None:
    (tmp_path / "splits.json").write_text('{"search": "rate"}')
    with pytest.raises(InputError, match=r"expected the splits\.json of a split search"):
        render_splits_report(tmp_path)


def test_many_splits_label_one_in_k_without_overlaps() -> None:
    bars = [SplitBar(f"{p}×tp2:{99 - p}×tp1", False, None if p % 7 == 0 else 1.0 + p / 10,
                     None, p == 30) for p in range(1, 100)]  # fmt: skip
    with mpl.rc_context(dict(fg.REPORT_RC)):
        drawn = splits_figure(bars, None)
        assert drawn.figure is not None
        drawn.figure.canvas.draw()
        labels = [t.get_text() for t in drawn.figure.axes[0].get_xticklabels()]
        assert len(labels) == 33 <= MAX_LABELS and labels[:2] == ["1×tp2:98×tp1", "4×tp2:95×tp1"]
        assert text_overlaps(drawn.figure) == []
    assert drawn.notes == ("one split in 3 labelled (the table lists all)",)


def test_every_label_names_the_tp_degrees_when_one_is_not_1(tmp_path: Path) -> None:
    page = render_splits_report(write_splits_folder(tmp_path / "s"))
    for label in ("1×tp1:3×tp1", "1×tp1:1×tp2", "colocated 5×tp1", "colocated 2×tp2"):
        assert f"<!-- {label} -->" in page, label
