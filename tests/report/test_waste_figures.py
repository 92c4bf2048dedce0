"""Waste figures draw any label as written: no mathtext (a ``$\\foo$`` or ``$$`` never crashes)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from simkv.kv.waste import CATEGORIES
from simkv.report import conventions as cv
from simkv.report.waste_figures import block_size_figure, breakdown_figure, save_figure

LABELS = ["$\\foo$", "$$", "a $x^2$ b", "$"]


def _replay(schemes: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame({"scheme": schemes, "block_size": [16.0] * len(schemes)})
    for name in CATEGORIES:
        frame[f"{name}_frac"] = 1 / len(CATEGORIES)
    return frame


@pytest.mark.parametrize("label", LABELS)
def test_breakdown_draws_mathtext_as_written(label: str, tmp_path: Path) -> None:
    fig = breakdown_figure(_replay([label, "paged"]), pool_slots=100)
    paths = save_figure(fig, tmp_path / "breakdown")  # drawing parses every text
    assert all(path.stat().st_size > 0 for path in paths)
    ticks = [tick.get_text() for tick in fig.axes[0].get_xticklabels()]
    assert ticks[0] == f"{label}\n(block=16.0)"
    assert not any(text.get_parse_math() for text in fig.axes[0].get_xticklabels())


def test_block_size_figure_without_mathtext(tmp_path: Path) -> None:
    static = pd.DataFrame({"scheme": ["paged", "paged", "max"], "block_size": [8, 16, None],
                           "waste_frac": [0.01, 0.02, 0.5]})  # fmt: skip
    fig = block_size_figure(static, max_context_len=4096)
    assert cv.legend_overlaps(fig) == []  # the legend stood on the contiguous lines
    save_figure(fig, tmp_path / "by_size")
    assert not fig.axes[0].title.get_parse_math()
