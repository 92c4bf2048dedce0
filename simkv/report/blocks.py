"""Pieces shared by the run and comparison reports: cards, figure blocks, latency samples,
value formats and the jinja2 environment."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from matplotlib.figure import Figure

from simkv.config.policy import traits_of
from simkv.metrics.recorder import RunFrames
from simkv.report import conventions as cv
from simkv.report import figures as fg
from simkv.report.run_folder import RunFolder

CDF_CAPTION = (
    "Empirical CDFs of TTFT, TPOT and E2EL over finished requests (TPOT: those with more than "
    "one output token) and of ITL over every inter-token gap; dots mark p50 and p99, dashed "
    "red lines the SLO where the config sets one."
)


@dataclass(frozen=True)
class Card:
    """A summary card: stable ``id``, a label and one or more (key, formatted value) rows."""

    id: str
    label: str
    rows: tuple[tuple[str, str], ...]
    note: str = ""


@dataclass(frozen=True)
class FigureBlock:
    """One figure of a report: element id, heading, caption, the inline SVG (``None`` when no
    panel had anything to show) and one line per panel left out."""

    id: str
    title: str
    caption: str
    svg: Markup | None
    notes: tuple[str, ...] = ()


def figure_block(fig_id: str, title: str, caption: str, drawn: cv.Drawn | Figure) -> FigureBlock:
    """A figure block of ``drawn`` (a bare ``Figure``: drawn, nothing left out); call inside
    ``rc_context(dict(figures.REPORT_RC))``."""
    if isinstance(drawn, Figure):
        drawn = cv.Drawn(drawn)
    if drawn.figure is None:
        return FigureBlock(fig_id, title, caption, None, drawn.notes)
    # matplotlib escapes every text it writes into the SVG, so the markup is safe to inline
    return FigureBlock(fig_id, title, caption, Markup(fg.svg_of(drawn.figure, fig_id)),
                       drawn.notes)  # fmt: skip


def bins_note(binned: pd.DataFrame, steps: pd.DataFrame) -> str:
    return f"{len(binned):,} time bins over {len(steps):,} engine steps"


def latency_samples(frames: RunFrames) -> fg.LatencySamples:
    """TTFT, TPOT and E2EL of finished requests (one sample each) and weighted ITL, in ms.

    Same definitions as :mod:`simkv.metrics.summary`: TPOT only for requests that generated
    more than one token.
    """
    req = frames.requests
    done = req[req["status"] == "finished"]
    multi = done[done["generated_tokens"] > 1]
    decode_ms = (multi["finish_s"] - multi["first_token_s"]) * 1e3
    per_request = {
        "ttft": (done["first_token_s"] - done["arrival_s"]) * 1e3,
        "tpot": decode_ms / (multi["generated_tokens"] - 1),
        "e2el": (done["finish_s"] - done["arrival_s"]) * 1e3,
    }
    out = {k: (v.to_numpy(), np.ones(len(v), dtype=np.int64)) for k, v in per_request.items()}
    out["itl"] = (frames.itl["itl_s"].to_numpy() * 1e3, frames.itl["count"].to_numpy())
    return out


def describe_setup(run: RunFolder) -> list[tuple[str, str]]:
    """(label, text) pairs naming the scheduler, model, GPU, KV pool and workload of a run."""
    c, s = run.config, run.summary
    work = c.get("workload") or {}
    kv = c.get("kv_cache") or {}
    blocks = s.get("kv_num_blocks")
    pool = "—" if blocks is None else f"{blocks:,} blocks × {kv.get('block_size', '?')} tokens"
    traits = traits_of((c.get("scheduler") or {}).get("kind"))
    if blocks is not None and traits is not None and traits.null_block:  # vLLM V1's block 0
        pool += f" ({blocks - 1:,} usable beside the null block)"
    tp = (c.get("parallel") or {}).get("tensor_parallel", 1)
    gpu = ("gpu", f"{(c.get('gpu') or {}).get('name', '—')} × {tp}")
    if run.replicas is not None:  # a fleet: its replicas' GPUs; the pool shown is replica 0's
        gpu, pool = ("fleet", fleet_text(run.replicas)), f"{pool} (replica 0)"
    return [
        ("scheduler", str((c.get("scheduler") or {}).get("kind", "—"))),
        ("model", str((c.get("model") or {}).get("name", "—"))),
        gpu,
        ("KV pool", pool),
        ("workload", " ".join(str(v) for v in (work.get("kind"), work.get("path")) if v)),
    ]


def fleet_text(replicas: pd.DataFrame) -> str:
    """A fleet's make-up, ``2 × h100-80gb TP1 + 1 × a100-80gb TP2``, in replica order (from
    its ``replicas.json``: ``gpu`` and ``tensor_parallel`` per replica, when recorded)."""
    if not {"gpu", "tensor_parallel"} <= set(replicas.columns):
        return f"{len(replicas)} replicas"
    kinds = list(zip(replicas["gpu"], replicas["tensor_parallel"], strict=True))
    counts = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}
    return " + ".join(f"{n} × {gpu} TP{int(tp)}" for (gpu, tp), n in counts.items())


def format_value(value: object, key: str = "") -> str:
    """A summary value for a table cell: a duration (``key`` ending ``_ms``) by
    :func:`~simkv.report.conventions.format_ms`, ints with separators, floats to 6 significant
    digits."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if key.endswith("_ms"):
        return cv.format_ms(float(value))
    return f"{value:,}" if isinstance(value, int) else f"{value:,.6g}"


def report_environment() -> Environment:
    return Environment(
        loader=PackageLoader("simkv.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
