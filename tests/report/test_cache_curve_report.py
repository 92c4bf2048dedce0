"""The cache-curve page: its figure follows the report conventions, its tables read the curve."""

import matplotlib as mpl
import numpy as np

from simkv.analysis.cache_curve import prefix_cache_curve
from simkv.report import conventions as cv
from simkv.report.cache_curve_report import (
    CurveSetup,
    curve_figure,
    curve_table,
    doubling_rows,
    render_page,
)
from simkv.report.figures import REPORT_RC
from simkv.workload.content import PromptContent


def _curve():
    rng = np.random.default_rng(0)
    prompts = [[(int(rng.integers(0, 30)), int(rng.integers(16, 400)))] for _ in range(300)]
    return prefix_cache_curve(PromptContent.from_lists(prompts, range(30, 330)), 16)


SETUP = CurveSetup("trace t.jsonl", "llama-3-8b", 2 * 2**20, (("HBM pool", 300), ("cpu", 900)))


def test_figure_has_no_overlapping_texts():
    with mpl.rc_context(dict(REPORT_RC)):
        fig = curve_figure(_curve(), SETUP)
        assert cv.text_overlaps(fig) == []
        assert cv.legend_overlaps(fig) == []


def test_page_tables_read_the_curve():
    curve = _curve()
    page = render_page(curve, SETUP)
    assert page.count("<svg") == 1 and "<script" not in page
    hbm = f"{curve.at(300)['hit_rate']:.1%}"
    # 300 blocks of 2 MiB = 0.59 GiB
    row = '<tr><td>HBM pool</td><td class="num">300</td><td class="num">0.59</td>\n'
    assert f'{row}<td class="num">{hbm}</td>' in page
    rows = doubling_rows(curve, SETUP.block_bytes)
    assert [r["blocks"] for r in rows][:3] == ["1", "2", "4"]
    assert rows[-1]["blocks"] == f"{curve.distinct_blocks:,}"
    assert rows[-1]["hit_rate"] == f"{curve.max_hit_rate:.1%}"


def test_table_has_gib_only_with_bytes_per_block():
    curve = _curve()
    assert "capacity_gib" not in curve_table(curve, None).columns
    table = curve_table(curve, 2**30)
    assert (table["capacity_gib"] == table["capacity_blocks"]).all()
