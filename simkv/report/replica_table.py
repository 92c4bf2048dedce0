"""The per-replica latency table of a fleet run's report, and the replicas' names.

One row per replica, computed from the requests frame (its ``replica`` column, the one the
fleet figures group by): the requests it finished, its
request throughput over the run's duration (first arrival to last completion, as the summary's
``duration_s``), p50 and p99 TTFT and p99 TPOT of its finished requests (latencies of
:func:`simkv.metrics.latency.request_latencies`). Group, GPU and the busy share (``busy_frac``
of :mod:`simkv.metrics.utilisation`, ``—`` in a folder written before it) come from
``replicas.json``.
Durations are printed by :func:`~simkv.report.conventions.format_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from simkv.metrics.latency import request_latencies
from simkv.report.conventions import format_ms

HEADERS = ("replica", "group", "GPU", "requests", "req/s", "p50 TTFT", "p99 TTFT", "p99 TPOT",
           "busy")  # fmt: skip
"""The table's column headers (``busy``: share of the run the replica spent in steps)."""


@dataclass(frozen=True)
class ReplicaRow:
    """One replica's row, as displayed (every cell a string)."""

    replica: str
    group: str
    gpu: str
    cells: tuple[str, ...]


def replica_name(row: pd.Series) -> str:
    """``r0 · h100``: a replica's number and its group (``r0`` when no group is recorded)."""
    group = row.get("group")
    return f"r{int(row['replica'])}" + (f" · {group}" if isinstance(group, str) and group else "")


def _percentile(values: pd.Series, q: float) -> float | None:
    finite = values.dropna().to_numpy(np.float64)
    return float(np.percentile(finite, q)) if finite.size else None


def replica_rows(requests: pd.DataFrame, replicas: pd.DataFrame) -> list[ReplicaRow]:
    """The table's rows, in replica order (a replica that finished nothing shows ``—``)."""
    latency = request_latencies(requests)
    finished = requests["status"] == "finished"
    done = requests[finished]
    duration = float(done["finish_s"].max() - requests["arrival_s"].min()) if len(done) else 0.0
    rows = []
    for _, info in replicas.sort_values("replica").iterrows():
        r = int(info["replica"])
        mine = requests["replica"] == r
        count = int((mine & finished).sum())
        own = latency[mine & finished]
        rate = count / duration if duration > 0 else None
        share = info.get("busy_frac")
        cells = (
            f"{count:,}",
            "—" if rate is None else f"{rate:.3g}",
            format_ms(_percentile(own["ttft_ms"], 50.0)),
            format_ms(_percentile(own["ttft_ms"], 99.0)),
            format_ms(_percentile(own["tpot_ms"], 99.0)),
            "—" if share is None or pd.isna(share) else f"{100 * share:.0f} %",
        )
        gpu = info.get("gpu")
        tp = info.get("tensor_parallel")
        gpu_text = str(gpu) if isinstance(gpu, str) else "—"
        if isinstance(gpu, str) and tp is not None and tp == tp:
            gpu_text += f" TP{int(tp)}"
        rows.append(ReplicaRow(f"r{r}", str(info.get("group") or "—"), gpu_text, cells))
    return rows
