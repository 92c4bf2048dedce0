"""The per-replica latency table of a fleet run's report, and the replicas' names.

One row per replica, computed from the requests frame (its ``replica`` column, the one the
fleet figures group by): the requests it finished, its
request throughput over the run's duration (first arrival to last completion, as the summary's
``duration_s``), p50 and p99 TTFT and p99 TPOT of its finished requests (latencies of
:func:`simkv.metrics.latency.request_latencies`). Group, GPU and the busy share (``busy_frac``
of :mod:`simkv.metrics.utilisation`, ``—`` in a folder written before it) come from
``replicas.json``.

A disaggregated fleet's ``replicas.json`` has each replica's ``role``: the table then gains a
``role`` column and a ``KV moved`` one (GB sent plus received), and lists the prefill
replicas first, then the decode ones, then any mixed. A prefill replica serves no request in
the requests frame: its row counts the requests it prefilled (``prefill_replica``), with their
TTFT as the client saw it and no TPOT (the decode side's).
Durations are printed by :func:`~simkv.report.conventions.format_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from simkv.metrics.latency import request_latencies
from simkv.report.conventions import format_ms

HEADERS = ("replica", "group", "GPU", "requests", "req/s", "p50 TTFT", "p99 TTFT", "p99 TPOT",
           "busy")  # fmt: skip
"""The table's column headers (``busy``: share of the run the replica spent in steps)."""
ROLE_ORDER = ("prefill", "decode", "mixed")
"""The order of a disaggregated fleet's rows, by role."""
GB = 1e9
"""Bytes per GB of the ``KV moved`` column (decimal, as link bandwidths are quoted)."""


def replica_headers(replicas: pd.DataFrame | None) -> tuple[str, ...]:
    """The column headers: :data:`HEADERS`, with ``role`` and ``KV moved`` when the replicas
    have roles."""
    if replicas is None or "role" not in replicas.columns:
        return HEADERS
    return (*HEADERS[:2], "role", *HEADERS[2:], "KV moved")


def _ordered(replicas: pd.DataFrame) -> pd.DataFrame:
    """Replicas in replica order, or by :data:`ROLE_ORDER` first when they have roles."""
    table = replicas.sort_values("replica")
    if "role" not in table.columns:
        return table
    rank = table["role"].map({role: i for i, role in enumerate(ROLE_ORDER)}).fillna(len(ROLE_ORDER))
    return table.assign(_rank=rank).sort_values(["_rank", "replica"], kind="stable")


@dataclass(frozen=True)
class ReplicaRow:
    """One replica's row, as displayed (every cell a string)."""

    replica: str
    group: str
    gpu: str
    cells: tuple[str, ...]
    role: str = ""


def replica_name(row: pd.Series) -> str:
    """``r0 · h100``: a replica's number and its group (``r0`` when no group is recorded)."""
    group, role = row.get("group"), row.get("role")
    name = f"r{int(row['replica'])}" + (f" · {group}" if isinstance(group, str) and group else "")
    return name + (f" ({role})" if isinstance(role, str) and role and role != group else "")


def _percentile(values: pd.Series, q: float) -> float | None:
    finite = values.dropna().to_numpy(np.float64)
    return float(np.percentile(finite, q)) if finite.size else None


def replica_rows(requests: pd.DataFrame, replicas: pd.DataFrame) -> list[ReplicaRow]:
    """The table's rows, in replica order or grouped by role (a replica that finished nothing
    shows ``—``)."""
    latency = request_latencies(requests)
    finished = requests["status"] == "finished"
    done = requests[finished]
    duration = float(done["finish_s"].max() - requests["arrival_s"].min()) if len(done) else 0.0
    rows = []
    for _, info in _ordered(replicas).iterrows():
        r = int(info["replica"])
        role = info.get("role")
        prefills = role == "prefill" and "prefill_replica" in requests.columns
        mine = requests["prefill_replica" if prefills else "replica"] == r
        count = int((mine & finished).sum())
        own = latency[mine & finished]
        rate = count / duration if duration > 0 else None
        share = info.get("busy_frac")
        cells = (
            f"{count:,}",
            "—" if rate is None else f"{rate:.3g}",
            format_ms(_percentile(own["ttft_ms"], 50.0)),
            format_ms(_percentile(own["ttft_ms"], 99.0)),
            "—" if prefills else format_ms(_percentile(own["tpot_ms"], 99.0)),
            "—" if share is None or pd.isna(share) else f"{100 * share:.0f} %",
        )
        if isinstance(role, str):
            moved = float(info.get("kv_bytes_out") or 0) + float(info.get("kv_bytes_in") or 0)
            cells += (f"{moved / GB:.3g} GB",)
        gpu = info.get("gpu")
        tp = info.get("tensor_parallel")
        gpu_text = str(gpu) if isinstance(gpu, str) else "—"
        if isinstance(gpu, str) and tp is not None and tp == tp:
            gpu_text += f" TP{int(tp)}"
        row = ReplicaRow(f"r{r}", str(info.get("group") or "—"), gpu_text, cells)
        rows.append(replace(row, role=role) if isinstance(role, str) else row)
    return rows
