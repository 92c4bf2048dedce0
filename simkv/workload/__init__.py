"""Workloads: request records, synthetic arrival/length generators, and trace readers."""

from simkv.workload.build import build_workload
from simkv.workload.request import Request, Workload
from simkv.workload.traces import (
    LengthsTable,
    read_lengths,
    read_mooncake_hash_ids,
    read_trace,
)

__all__ = [
    "LengthsTable",
    "Request",
    "Workload",
    "build_workload",
    "read_lengths",
    "read_mooncake_hash_ids",
    "read_trace",
]
