"""Figures of a waste study: where the KV memory went, and paged waste vs block size.

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot global state) and
rendered by the Agg/SVG canvases. Each is saved as PNG and SVG; the SVG is byte-stable across
runs (fixed ``svg.hashsalt``, no date metadata). Figures are built and saved under the run
reports' rcParams (:data:`simkv.report.figures.REPORT_RC`): no mathtext, so any label is drawn
as written (``$\\foo$`` or ``$$`` included).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import pandas as pd
from matplotlib.figure import Figure

from simkv.analysis.waste_study import WasteStudy
from simkv.kv.waste import CATEGORIES, CATEGORY_LABELS
from simkv.outputs import make_folder, write_file
from simkv.report.figures import REPORT_RC

_COLORS = ("tab:blue", "tab:orange", "tab:red", "tab:purple", "0.85")
_CONTIGUOUS_STYLES = (
    ("max", "tab:red", "--"),
    ("pow2", "tab:orange", "-."),
    ("oracle", "tab:green", ":"),
)


def _scheme_label(scheme: str, block_size: object) -> str:
    if pd.isna(block_size):
        return f"contiguous\n{scheme}"
    return f"{scheme}\n(block={block_size})"


def breakdown_figure(replay: pd.DataFrame, *, pool_slots: int) -> Figure:
    """One stacked bar per scheme: the time-averaged five-way split of the pool.

    The label on each bar is the wasted share: reservation + internal + external fragmentation
    (a scheme whose every request was skipped has NaN shares, no bar and "nothing ran").
    """
    with mpl.rc_context(dict(REPORT_RC)):  # texts take text.parse_math when created
        return _breakdown(replay, pool_slots)


def _breakdown(replay: pd.DataFrame, pool_slots: int) -> Figure:
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    labels = [
        _scheme_label(s, b) for s, b in zip(replay["scheme"], replay["block_size"], strict=True)
    ]
    x = range(len(labels))
    bottom = [0.0] * len(labels)
    for name, label, color in zip(CATEGORIES, CATEGORY_LABELS, _COLORS, strict=True):
        share = (replay[f"{name}_frac"] * 100).tolist()
        ax.bar(x, share, bottom=bottom, label=label, color=color, edgecolor="white", width=0.6)
        bottom = [b + s for b, s in zip(bottom, share, strict=True)]
    wasted = replay[["reservation_frac", "internal_frag_frac", "external_frag_frac"]]
    for i, share in enumerate(wasted.sum(axis=1, min_count=1)):
        text = "nothing ran" if pd.isna(share) else f"{share:.0%} wasted"
        ax.text(i, 101, text, ha="center", va="bottom", fontsize=9)
    ax.set_xticks(list(x), labels)
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ax.set_ylim(0, 112)
    ax.set_ylabel(f"% of KV pool ({pool_slots:,} slots), time-averaged")
    ax.set_title("Where the KV memory went (pool replay)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def block_size_figure(static: pd.DataFrame, *, max_context_len: int) -> Figure:
    """Paged waste vs block size (static snapshot), contiguous schemes as reference lines."""
    with mpl.rc_context(dict(REPORT_RC)):
        return _by_block_size(static, max_context_len)


def _by_block_size(static: pd.DataFrame, max_context_len: int) -> Figure:
    fig = Figure(figsize=(8.0, 4.0))
    ax = fig.add_subplot()
    paged = static[static["scheme"] == "paged"].sort_values("block_size")
    sizes = paged["block_size"].astype(int).tolist()
    ax.plot(sizes, (paged["waste_frac"] * 100).tolist(), marker="o", label="paged")
    for scheme, color, style in _CONTIGUOUS_STYLES:
        row = static[static["scheme"] == scheme]
        if len(row):
            waste = float(row["waste_frac"].iloc[0]) * 100
            ax.axhline(waste, color=color, linestyle=style, label=f"contiguous {scheme}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel("block size (tokens)")
    ax.set_ylabel("% of allocated KV slots wasted")
    ax.set_title(f"Static snapshot: waste vs block size (max context {max_context_len})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg``; the SVG bytes depend only on the figure."""
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    with mpl.rc_context(dict(REPORT_RC)):
        write_file(paths[0], lambda handle: fig.savefig(handle, format="png", dpi=150))
        write_file(
            paths[1], lambda handle: fig.savefig(handle, format="svg", metadata={"Date": None})
        )
    return paths


def write_waste_figures(study: WasteStudy, out_dir: Path) -> list[Path]:
    """Both figures of ``study`` as PNG + SVG in ``out_dir`` (created if missing)."""
    make_folder(out_dir)
    params = study.params
    breakdown = breakdown_figure(study.replay, pool_slots=params.pool_slots)
    by_size = block_size_figure(study.static, max_context_len=params.max_context_len)
    return save_figure(breakdown, out_dir / "waste_breakdown") + save_figure(
        by_size, out_dir / "waste_vs_block_size"
    )
