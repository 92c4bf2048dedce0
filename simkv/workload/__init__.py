"""Workloads: request records, synthetic arrival/length/content generators, and trace readers."""

from simkv.workload.build import build_workload
from simkv.workload.content import PromptContent, block_keys
from simkv.workload.generators import multi_turn, shared_prefix
from simkv.workload.request import Request, Workload
from simkv.workload.traces import (
    LengthsTable,
    read_lengths,
    read_mooncake_hash_ids,
    read_trace,
)

__all__ = [
    "LengthsTable",
    "PromptContent",
    "Request",
    "Workload",
    "block_keys",
    "build_workload",
    "multi_turn",
    "read_lengths",
    "read_mooncake_hash_ids",
    "read_trace",
    "shared_prefix",
]
