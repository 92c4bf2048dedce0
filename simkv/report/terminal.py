"""A run's summary in the terminal: grouped sections with units in the labels, as ``vllm bench
serve`` prints its result, at most 80 columns wide (the SLO verdict: :mod:`simkv.report.verdict`).

Every summary key is shown once: the keys of :data:`SECTIONS` and the latency sections in
their groups, any other (a fleet's, an extra percentile's) under "Other" by its own name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from simkv.metrics.text import format_value

SECTIONS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Requests", (
        ("num_requests", "Requests"), ("completed", "Completed"), ("rejected", "Rejected"),
        ("aborted", "Aborted"), ("truncated", "Truncated (max length)"),
        ("duration_s", "Duration (s)"), ("offered_requests_per_s", "Offered rate (req/s)"),
        ("arrival_cv", "Burstiness (inter-arrival CV)"),
        ("max_concurrent_requests", "Peak concurrency (requests)"),
        ("total_input_tokens", "Input tokens"), ("total_output_tokens", "Output tokens"),
    )),
    ("Throughput", (
        ("request_throughput", "Request throughput (req/s)"),
        ("request_goodput", "Request goodput (req/s)"),
        ("output_throughput", "Output throughput (tok/s)"),
        ("total_token_throughput", "Total token throughput (tok/s)"),
        ("max_output_tokens_per_s", "Peak output throughput (tok/s)"),
    )),
    ("Scheduling", (
        ("mean_queue_ms", "Mean queueing delay (ms)"), ("num_steps", "Engine steps"),
        ("preemptions", "Preemptions"), ("recomputed_tokens", "Recomputed tokens"),
        ("swap_gib", "Swapped (GiB)"),
    )),
    ("KV memory", (
        ("kv_token_slots", "KV token slots"), ("mean_kv_usage", "Mean KV usage (share)"),
        ("peak_kv_usage", "Peak KV usage (share)"), ("mean_token_frac", "Tokens (share)"),
        ("mean_reserved_frac", "Reserved (share)"),
        ("mean_internal_frag_frac", "Internal fragmentation (share)"),
        ("mean_external_frag_frac", "External fragmentation (share)"),
        ("mean_free_frac", "Free (share)"), ("mean_fork_saving", "Fork saving (share)"),
    )),
    ("Prefix cache", (
        ("prefix_hit_rate", "Hit rate (prompt tokens)"),
        ("prefix_hit_request_rate", "Hit rate (requests)"),
        ("prefill_tokens_saved", "Prefill tokens saved"), ("evictions", "Evictions (blocks)"),
        ("mean_cached_blocks", "Mean cached blocks"), ("mean_shared_slots", "Mean shared slots"),
        ("peak_shared_slots", "Peak shared slots"),
    )),
    ("Fleet", (
        ("num_replicas", "Replicas"),
        ("outstanding_imbalance", "Load imbalance (max/mean outstanding)"),
        ("outstanding_cv", "Load CV (outstanding requests)"),
    )),
    ("Prefill/decode disaggregation", (
        ("remote_prefill_frac", "Prefilled remotely (share)"),
        ("kv_transfers", "KV transfers"), ("kv_transfer_bytes", "KV bytes moved"),
        ("prefill_prefix_hit_frac", "Prefill-side prefix hits (share of prompts)"),
        ("kv_returns", "KV returns (decode → prefill)"),
        ("kv_return_bytes", "KV bytes moved back"),
        ("kv_returns_dropped", "KV returns dropped (no blocks)"),
        ("link_busy_frac", "Link busy (share of run, per NIC)"),
        ("mean_ttft_prefill_queue_ms", "TTFT: prefill queue (ms, mean)"),
        ("mean_ttft_prefill_ms", "TTFT: prefill (ms, mean)"),
        ("mean_ttft_kv_wait_ms", "TTFT: wait for decode blocks (ms, mean)"),
        ("mean_ttft_transfer_ms", "TTFT: KV transfer (ms, mean)"),
        ("mean_ttft_decode_queue_ms", "TTFT: decode queue (ms, mean)"),
        ("mean_ttft_decode_step_ms", "TTFT: first decode step (ms, mean)"),
    )),
    ("KV offload tiers", (
        ("tier_hit_rate_cpu", "CPU tier: hit rate (prompt tokens)"),
        ("tier_hit_requests_cpu", "CPU tier: requests loading"),
        ("tier_loaded_bytes_cpu", "CPU tier: bytes loaded"),
        ("tier_stored_bytes_cpu", "CPU tier: bytes stored"),
        ("tier_evicted_blocks_cpu", "CPU tier: evicted (blocks)"),
        ("tier_dropped_blocks_cpu", "CPU tier: stores dropped (blocks)"),
        ("tier_capacity_blocks_cpu", "CPU tier: capacity (blocks)"),
        ("tier_hit_rate_disk", "disk tier: hit rate (prompt tokens)"),
        ("tier_hit_requests_disk", "disk tier: requests loading"),
        ("tier_loaded_bytes_disk", "disk tier: bytes loaded"),
        ("tier_stored_bytes_disk", "disk tier: bytes stored"),
        ("tier_evicted_blocks_disk", "disk tier: evicted (blocks)"),
        ("tier_dropped_blocks_disk", "disk tier: stores dropped (blocks)"),
        ("tier_capacity_blocks_disk", "disk tier: capacity (blocks)"),
        ("tier_hit_rate_remote", "remote tier: hit rate (prompt tokens)"),
        ("tier_hit_requests_remote", "remote tier: requests loading"),
        ("tier_loaded_bytes_remote", "remote tier: bytes loaded"),
        ("tier_stored_bytes_remote", "remote tier: bytes stored"),
        ("tier_evicted_blocks_remote", "remote tier: evicted (blocks)"),
        ("tier_dropped_blocks_remote", "remote tier: stores dropped (blocks)"),
        ("tier_capacity_blocks_remote", "remote tier: capacity (blocks)"),
        ("tier_loads", "Loads"), ("tier_load_ms_mean", "Load time (ms, mean)"),
        ("tier_load_ms_p50", "Load time (ms, p50)"), ("tier_load_ms_p99", "Load time (ms, p99)"),
    )),
)  # fmt: skip
"""(section title, ((summary key, label with unit), ...)) in print order."""
LATENCIES = (("ttft", "Time to first token"), ("tpot", "Time per output token"),
             ("itl", "Inter-token latency"), ("e2el", "End-to-end latency"))  # fmt: skip
"""(latency name in summary keys, its section title; every statistic in ms)."""
LATENCY_SECTIONS_AFTER = "Throughput"
"""The latency sections follow this section, as vLLM's result lists them."""


def _latency_rows(summary: Mapping[str, Any], name: str) -> list[tuple[str, str]]:
    """``(key, "P99 TTFT (ms)")`` of each statistic of latency ``name`` in the summary."""
    suffix = f"_{name}_ms"
    stats = [key for key in summary if key.endswith(suffix)]
    stats = [key for key in stats if "_" not in key.removesuffix(suffix)]
    return [(key, f"{key.removesuffix(suffix).capitalize()} {name.upper()} (ms)") for key in stats]


def _sections(summary: Mapping[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    out: list[tuple[str, list[tuple[str, str]]]] = []
    for title, rows in SECTIONS:
        out.append((title, [row for row in rows if row[0] in summary]))
        if title == LATENCY_SECTIONS_AFTER:
            out += [(t, _latency_rows(summary, n)) for n, t in LATENCIES]
    shown = {key for _, rows in out for key, _ in rows}
    other = [(key, key) for key in summary if key not in shown and not key.startswith("slo_")]
    return [section for section in [*out, ("Other", other)] if section[1]]


def summary_table(summary: Mapping[str, Any], title: str) -> Table:
    """The summary as one two-column table, a section per group (fits 80 columns)."""
    table = Table(title=title, show_header=False, min_width=60, title_style="bold")
    table.add_column("metric", max_width=46, no_wrap=True)
    table.add_column("value", justify="right", max_width=20, no_wrap=True)
    for title_, rows in _sections(summary):
        table.add_row(f"[bold]{title_}[/bold]", "")
        for key, label in rows:
            table.add_row(f"  {label}", format_value(key, summary[key]))
        table.add_section()
    return table
