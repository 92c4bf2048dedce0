"""The fleet section of a run report (a run with ``fleet:``): per-replica KV usage and queue
over time, and the routing and load per replica.

Per-replica series share one set of time bins (:data:`FLEET_BINS` equal bins over the run);
in each bin a replica's KV usage (blocks used / its pool, %) and waiting requests are its
steps' duration-weighted means, carried forward over bins where it ran no step. Up to
:data:`MAX_LINES` replicas get a line each; beyond, the figure draws the fleet's min, median
and max per bin (one line each), so the legend stays readable. The routing bars are labelled
with each replica's number, group and GPU (``r0 · h100`` over ``h100-80gb TP1``) up to
:data:`MAX_LINES` replicas; a disaggregated fleet's names add a replica's role when its group
is not named so (``r0 · fast (prefill)``), and its bars are coloured by role
(:data:`ROLE_COLORS`). Figures follow :mod:`simkv.report.conventions`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from simkv.report import conventions as cv
from simkv.report import figures as fg
from simkv.report.replica_table import replica_name
from simkv.report.time_figures import stack

FLEET_BINS = 200
"""Time bins of the per-replica series."""
MAX_LINES = 8
"""Most replicas drawn one line each; more are drawn as min / median / max."""


def replica_series(steps: pd.DataFrame, column: str, edges: np.ndarray) -> np.ndarray:
    """``(replicas, bins)``: each replica's duration-weighted mean of ``column`` (a step
    column, or ``kv_usage_pct``) per bin of ``edges``, carried forward over empty bins."""
    n = int(steps["replica"].max()) + 1
    bins = len(edges) - 1
    start = steps["time_s"].to_numpy()
    idx = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, bins - 1)
    if column == "kv_usage_pct":
        used = steps["blocks_used"].to_numpy(np.float64)
        pool = used + steps["blocks_free"].to_numpy(np.float64)
        values = np.divide(used * 100, pool, out=np.zeros_like(used), where=pool > 0)
    else:
        values = steps[column].to_numpy(np.float64)
    dur = steps["duration_s"].to_numpy()
    flat = steps["replica"].to_numpy() * bins + idx
    busy = np.bincount(flat, weights=dur, minlength=n * bins).reshape(n, bins)
    total = np.bincount(flat, weights=values * dur, minlength=n * bins).reshape(n, bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = pd.DataFrame((total / busy).T)
    return out.ffill().fillna(0.0).to_numpy().T


def _lines(ax: Axes, series: np.ndarray, edges: np.ndarray, names: list[str]) -> None:
    if len(series) <= MAX_LINES:
        for r, values in enumerate(series):
            name = names[r] if r < len(names) else f"r{r}"
            fg.stairs(ax, values, edges, label=name, linewidth=0.9)
        return
    for name, values, style in (
        ("max", series.max(axis=0), "-"), ("median", np.median(series, axis=0), "--"),
        ("min", series.min(axis=0), ":"),
    ):  # fmt: skip
        fg.stairs(ax, values, edges, label=f"{name} of {len(series)}", color="0.2",
                  linestyle=style, linewidth=0.9)  # fmt: skip


def fleet_time_figure(steps: pd.DataFrame, replicas: pd.DataFrame | None = None) -> cv.Drawn:
    """Each replica's KV usage (%) and waiting requests (when any waited) over time; lines
    are named ``r0 · h100`` from ``replicas`` (its ``replicas.json``) when given."""
    if steps.empty or "replica" not in steps:
        return cv.Drawn(None, ("no engine steps in this run",))
    end = float((steps["time_s"] + steps["duration_s"]).max())
    edges = np.linspace(float(steps["time_s"].min()), end, FLEET_BINS + 1)
    rows = [] if replicas is None else replicas.sort_values("replica").iterrows()
    names = [replica_name(row) for _, row in rows]
    usage = replica_series(steps, "kv_usage_pct", edges)
    waiting = replica_series(steps, "num_waiting", edges)
    panels: list[tuple[str, cv.Panel]] = [
        (cv.axis_label("KV used", "% of pool"), lambda ax: _lines(ax, usage, edges, names)),
    ]
    notes = []
    if waiting.any():
        panels.append(
            (cv.axis_label("waiting", "requests"), lambda ax: _lines(ax, waiting, edges, names))
        )
    else:
        notes.append("no replica had waiting requests")
    return cv.Drawn(stack(panels), tuple(notes))


def routing_figure(replicas: pd.DataFrame) -> cv.Drawn:
    """Per replica: requests routed to it, its time-averaged outstanding requests, and its
    prefix-cache hit rate (when any replica caches prefixes)."""
    if replicas.empty:
        return cv.Drawn(None, ("no replicas",))
    panels = [
        ("routed", "req", replicas["routed"].to_numpy(np.float64)),
        ("outstanding", "req", replicas["mean_outstanding"].to_numpy(np.float64)),
    ]
    hits = pd.to_numeric(replicas.get("prefix_hit_rate"), errors="coerce")
    notes = []
    if hits is not None and hits.notna().any():
        panels.append(("prefix hits", "%", hits.fillna(0).to_numpy() * 100))
    else:
        notes.append("no prefix caching on any replica")
    x = replicas["replica"].to_numpy()
    named = len(x) <= MAX_LINES  # one label per bar fits; beyond, replica numbers only
    height = cv.panels_height(len(panels), 1.55, shared=True) + (NAME_LINE_IN if named else 0)
    fig = Figure(figsize=(10.4, height))
    bottom = cv.MARGINS_IN["bottom"] + (NAME_LINE_IN if named else 0)
    axes = cv.place_panels(fig, len(panels), bottom_in=bottom)
    colors = _role_colors(replicas)
    for ax, (quantity, unit, values) in zip(axes, panels, strict=True):
        ax.bar(x, values, width=0.6, color=colors)
        cv.tidy_axes(ax)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=cv.MAX_TICKS - 1, integer=True))
        ax.set_ylabel(cv.axis_label(quantity, unit))
    if named:
        axes[-1].set_xticks(x, [bar_label(row) for _, row in replicas.iterrows()])
    axes[-1].set_xlabel("replica" if named else "replica (numbers: see the per-replica table)")
    axes[-1].set_xlim(-0.6, len(x) - 0.4)
    return cv.Drawn(fig, tuple(notes))


def _role_colors(replicas: pd.DataFrame) -> str | list[str]:
    """Bar colours: one per replica by its role (a disaggregated fleet), else one for all."""
    if "role" not in replicas.columns:
        return "tab:blue"
    return [ROLE_COLORS.get(str(role), "tab:gray") for role in replicas["role"]]


ROLE_COLORS = {"prefill": "tab:orange", "decode": "tab:blue", "mixed": "tab:green"}
"""Bar colours of a disaggregated fleet's roles."""
NAME_LINE_IN = 0.18
"""Height (inches) of the second line of a bar's label (its GPU)."""


def bar_label(row: pd.Series) -> str:
    """A replica's bar label: ``r0 · h100`` over its GPU (``h100-80gb TP1``) when recorded."""
    gpu, tp = row.get("gpu"), row.get("tensor_parallel")
    if not isinstance(gpu, str):
        return replica_name(row)
    return replica_name(row) + "\n" + gpu + (f" TP{int(tp)}" if tp is not None and tp == tp else "")
