"""The output of ``simkv cache-curve``: the curve's table (CSV) and a self-contained HTML page.

The page holds one figure (inline SVG, :mod:`simkv.report.figures`' conventions): the token
and request hit rates against capacity in blocks (log scale), with a second axis in GiB when
the bytes per block are known, and a dashed line at each marked capacity (an HBM pool, a CPU
or disk tier); a table of the hit rates at the marks; and a table at doubling capacities. The
same curve and marks always give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from simkv.analysis.cache_curve import CacheCurve
from simkv.outputs import make_folder, write_file
from simkv.report import conventions as cv
from simkv.report.blocks import figure_block, report_environment
from simkv.report.figures import REPORT_RC

GIB = 2**30
TABLE_FILE = "cache_curve.csv"
PAGE_FILE = "cache_curve.html"
MAX_ROWS = 1000
"""Most rows of ``cache_curve.csv`` and points of the figure (:meth:`CacheCurve.sampled`)."""
_MARK_COLORS = ("tab:red", "tab:purple", "tab:brown", "tab:gray", "tab:olive")


@dataclass(frozen=True)
class CurveSetup:
    """What the page says about its inputs: the trace, the model and bytes per block (None:
    no model named, the x axis is in blocks only), and the marked capacities by name."""

    source: str
    model: str | None
    block_bytes: int | None
    marks: tuple[tuple[str, int], ...] = ()


def curve_table(curve: CacheCurve, block_bytes: int | None) -> pd.DataFrame:
    """The curve at up to :data:`MAX_ROWS` capacities, with ``capacity_gib`` after
    ``capacity_blocks`` when the bytes per block are known."""
    table = curve.sampled(MAX_ROWS).copy()
    if block_bytes is not None:
        table.insert(1, "capacity_gib", table["capacity_blocks"] * block_bytes / GIB)
    return table


def _gib(blocks: int, block_bytes: int | None) -> str:
    return "—" if block_bytes is None else f"{blocks * block_bytes / GIB:,.2f}"


def _row(name: str, blocks: int, curve: CacheCurve, block_bytes: int | None) -> dict[str, str]:
    at = curve.at(blocks)
    return {
        "name": name,
        "blocks": f"{blocks:,}",
        "gib": _gib(blocks, block_bytes),
        "hit_rate": f"{at['hit_rate']:.1%}",
        "request_hit_rate": f"{at['request_hit_rate']:.1%}",
    }


def doubling_rows(curve: CacheCurve, block_bytes: int | None) -> list[dict[str, str]]:
    """Rows at 1, 2, 4, … blocks up to the first capacity that never evicts, then that one."""
    top = max(curve.distinct_blocks, 1)
    sizes = [1 << k for k in range(top.bit_length()) if 1 << k < top] + [top]
    return [_row("", size, curve, block_bytes) for size in sizes]


def curve_figure(curve: CacheCurve, setup: CurveSetup) -> Figure:
    """Hit rates (token and request) against capacity, marks as dashed vertical lines."""
    with mpl.rc_context(dict(REPORT_RC)):
        fig = Figure(figsize=(9.0, 4.2))
        ax = fig.add_subplot()
        table = curve.sampled(MAX_ROWS)
        right = max(curve.distinct_blocks, 2) * 1.5
        x = np.append(np.maximum(table["capacity_blocks"].to_numpy(), 1), right)
        for column, label in (("hit_rate", "token hit rate"), ("request_hit_rate", "requests hit")):
            y = np.append(table[column].to_numpy(), table[column].iloc[-1]) * 100
            ax.step(x, y, where="post", label=label)
        for (name, blocks), color in zip(setup.marks, _MARK_COLORS * 4, strict=False):
            label = f"{name}: {curve.at(blocks)['hit_rate']:.0%}"
            ax.axvline(max(blocks, 1), color=color, linestyle="--", linewidth=1, label=label)
        ax.set_xscale("log")
        cv.tidy_axes(ax, log_x=True)
        ax.set_xlim(1, right)
        ax.set_ylim(0, 100)
        ax.set_xlabel(f"cache capacity (blocks of {curve.block_size} tokens)")
        ax.set_ylabel("% of prompt tokens / requests")
        cv.legend_beside(ax, fontsize=7.5)
        if setup.block_bytes is not None:
            per_gib = setup.block_bytes / GIB
            top = ax.secondary_xaxis(
                "top", functions=(lambda b: b * per_gib, lambda g: g / per_gib)
            )
            top.xaxis.set_major_formatter(cv.COMPACT)
            top.set_xlabel(f"GiB of KV cache ({setup.model})")
        fig.tight_layout()
    return fig


def render_page(curve: CacheCurve, setup: CurveSetup) -> str:
    """The HTML page of ``curve`` (no external references, no script)."""
    with mpl.rc_context(dict(REPORT_RC)):
        figure = figure_block(
            "curve",
            "Hit rate against cache capacity",
            "An ideal LRU prefix cache of each capacity, requests in arrival order.",
            curve_figure(curve, setup),
        )
    return (
        report_environment()
        .get_template("cache_curve.html.j2")
        .render(
            setup=setup,
            curve=curve,
            figure=figure,
            marks=[_row(name, blocks, curve, setup.block_bytes) for name, blocks in setup.marks],
            doubling=doubling_rows(curve, setup.block_bytes),
            max_hit_rate=f"{curve.max_hit_rate:.1%}",
        )
    )


def write_cache_curve(curve: CacheCurve, setup: CurveSetup, out_dir: Path) -> list[Path]:
    """``cache_curve.csv`` and ``cache_curve.html`` in ``out_dir``; their paths."""
    make_folder(out_dir)
    table = curve_table(curve, setup.block_bytes)
    csv = write_file(out_dir / TABLE_FILE, table.to_csv(index=False, float_format="%.6g"))
    page = write_file(out_dir / PAGE_FILE, render_page(curve, setup))
    return [csv, page]
