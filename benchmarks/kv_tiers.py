"""KV offload tiers, the evidence: hit rate against capacity on the Mooncake traces, what CPU and
disk tiers buy an agentic workload, and that a tier's bandwidth moves TTFT while its capacity
moves the hit rate as ``simkv cache-curve`` predicts.

    .venv/bin/python benchmarks/kv_tiers.py                 # prints the tables
    .venv/bin/python benchmarks/kv_tiers.py --write-docs    # and rewrites docs/kv-tiers-evidence.md

1. **Curves** (``simkv cache-curve``'s :func:`~simkv.analysis.cache_curve.prefix_cache_curve`,
   block size 16): the bundled Mooncake traces' hit rate with a cache that never evicts, beside
   the cache ratios the Mooncake paper gives for the whole traces, and at a few capacities.
2. **The agentic study** (``configs/agentic.yaml``'s coding-agent sessions, ``SESSIONS`` at
   ``RATE`` sessions/s, on an HBM pool of ``HBM_GIB`` GiB as left beside a larger model): HBM
   only, + a CPU tier (``CPU_GIB`` GiB over the A100's PCIe 4 host link), + CPU and an NVMe Gen4
   disk (``DISK_GIB`` GiB). Each: the hit rates, TTFT p50/p99 with the load time, goodput;
   then the fewest replicas (``session_affinity`` router, ``FLEET_RATE`` sessions/s) whose p99
   TTFT is within ``SLO_TTFT_MS``.
3. **Bandwidth against capacity** (the Mooncake synthetic trace, Qwen2.5-7B on one H100, HBM
   ``MC_HBM_GIB`` GiB): the CPU tier at ``MC_CPU_GIB`` GiB, at half its bandwidth, and at half
   its capacity; the hit rate of each beside the curve's at HBM + CPU blocks.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from doc_blocks import markdown_table, publish

import simkv
from simkv.analysis.cache_curve import prefix_cache_curve
from simkv.run import load_config
from simkv.workload.build import build_workload

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "kv-tiers-evidence.md"
SESSIONS, RATE, HBM_GIB, CPU_GIB, DISK_GIB = 120, 0.2, 8.0, 32.0, 512.0
FLEET_RATE, SLO_TTFT_MS, MAX_REPLICAS = 0.6, 2000.0, 4
MC_HBM_GIB, MC_CPU_GIB = 4.0, 32.0
PAPER_RATIOS = {"conversation": 0.40, "toolagent": 0.59, "synthetic": 0.66}
"""The Mooncake paper's cache ratios of its whole traces (Qin et al., FAST 2025, Table 1)."""
TRACES = (
    ("synthetic", "traces/mooncake/synthetic_trace.jsonl", "whole trace, 3,993 requests"),
    ("conversation", "traces/mooncake/conversation_trace.jsonl", "whole trace, 12,031 requests"),
)  # fmt: skip
GIB = 1 << 30


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def curves() -> list[list[str]]:
    """Per bundled Mooncake trace: never-evicting hit rate beside the paper's, and at 16, 64
    and 256 GiB of Qwen2.5-7B KV."""
    cfg = load_config(ROOT / "configs" / "mooncake.yaml")
    block_bytes = 16 * cfg.model.kv_bytes_per_token
    rows = []
    for name, path, note in TRACES:
        wl = cfg.workload.model_copy(update={"path": ROOT / path, "time_scale": 1.0})
        content = build_workload(wl, np.random.default_rng(0), ROOT).content
        curve = prefix_cache_curve(content, 16)
        at = [float(curve.at(int(g * GIB // block_bytes))["hit_rate"]) for g in (16, 64, 256)]
        rows.append([name, note, _pct(curve.max_hit_rate), _pct(PAPER_RATIOS[name]),
                     *(_pct(a) for a in at)])  # fmt: skip
    return rows


def _agentic(tiers: list[dict[str, Any]], rate: float = RATE, **over: Any) -> dict[str, Any]:
    return simkv.simulate(
        ROOT / "configs" / "agentic.yaml", workload__num_sessions=SESSIONS,
        workload__arrival__rate=rate, kv_cache__capacity_gib=HBM_GIB, kv_cache__tiers=tiers,
        **over,
    ).summary  # fmt: skip


SETUPS = (
    ("HBM only", []),
    ("+ CPU", [{"kind": "cpu", "capacity_gib": CPU_GIB}]),
    ("+ CPU + disk", [{"kind": "cpu", "capacity_gib": CPU_GIB},
                      {"kind": "disk", "capacity_gib": DISK_GIB, "medium": "nvme_gen4"}]),
)  # fmt: skip


def replicas_needed(tiers: list[dict[str, Any]]) -> str:
    """The fewest replicas whose p99 TTFT is within the SLO at ``FLEET_RATE`` sessions/s."""
    for n in range(1, MAX_REPLICAS + 1):
        fleet = {"router": {"kind": "session_affinity"}, "replicas": [{"name": "r", "count": n}]}
        s = _agentic(tiers, FLEET_RATE, fleet=fleet)
        if (s.get("p99_ttft_ms") or float("inf")) <= SLO_TTFT_MS:
            return f"{n} (p99 TTFT {_ms(s['p99_ttft_ms'])} ms)"
    return f"> {MAX_REPLICAS}"


def agentic_study() -> list[list[str]]:
    rows = []
    for name, tiers in SETUPS:
        s = _agentic(tiers)
        tier_hits = ", ".join(
            f"{k} {_pct(s[f'tier_hit_rate_{k}'])}" for k in ("cpu", "disk")
            if f"tier_hit_rate_{k}" in s
        )  # fmt: skip
        rows.append([
            name, _pct(s["prefix_hit_rate"]), tier_hits or "—", _ms(s["median_ttft_ms"]),
            _ms(s["p99_ttft_ms"]), _ms(s.get("tier_load_ms_mean")), _ms(s.get("tier_load_ms_p99")),
            f"{s['request_goodput']:.2f}", replicas_needed(tiers),
        ])  # fmt: skip
    return rows


def bandwidth_and_capacity() -> list[list[str]]:
    """The Mooncake synthetic trace with a CPU tier: as given, half its bandwidth, half its
    capacity; the simulated hit rate beside the curve's at HBM + CPU blocks."""
    cfg = load_config(ROOT / "configs" / "mooncake.yaml")
    block_bytes = 16 * cfg.model.kv_bytes_per_token
    content = build_workload(cfg.workload, np.random.default_rng(0), ROOT / "configs").content
    curve = prefix_cache_curve(content, 16)
    link = cfg.gpu.host_link_gbps
    cases = (
        ("CPU 32 GiB", MC_CPU_GIB, link),
        ("half the bandwidth", MC_CPU_GIB, link / 2),
        ("half the capacity", MC_CPU_GIB / 2, link),
        ("no CPU tier", 0.0, link),
    )
    rows = []
    for name, gib, gbps in cases:
        tiers = [] if not gib else [{"kind": "cpu", "capacity_gib": gib,
                                     "read_gb_per_s": gbps, "write_gb_per_s": gbps}]  # fmt: skip
        s = simkv.simulate(
            ROOT / "configs" / "mooncake.yaml", kv_cache__capacity_gib=MC_HBM_GIB,
            kv_cache__tiers=tiers, model__max_model_len=32768,
        ).summary  # fmt: skip
        blocks = int(MC_HBM_GIB * GIB // block_bytes) + int(gib * GIB // block_bytes)
        predicted = float(curve.at(blocks)["hit_rate"])
        rows.append([
            name, f"{gbps:g}", _pct(s["prefix_hit_rate"]), _pct(predicted),
            _ms(s["mean_ttft_ms"]), _ms(s["p99_ttft_ms"]), _ms(s.get("tier_load_ms_mean")),
        ])  # fmt: skip
    return rows


def render(curve_rows: list[list[str]], study: list[list[str]], bw: list[list[str]],
           wall_s: float, cpu_s: float) -> str:  # fmt: skip
    load = os.getloadavg()[0]
    day = datetime.date.today().isoformat()
    header = (
        f"Written by `.venv/bin/python benchmarks/kv_tiers.py --write-docs` ({day}, "
        f"{wall_s:.0f} s wall, {cpu_s:.0f} s CPU, load average {load:.1f} on 2 shared cores); "
        "its docstring states the setups. The semantics are in [kv-tiers.md](kv-tiers.md)."
    )
    curves_note = (
        "`simkv cache-curve` at block size 16 (Qwen2.5-7B's KV for the GiB columns), beside "
        "the paper's cache ratios of the same whole traces. The tool-and-agent trace (59 % in "
        "the paper) is not bundled: `tools/fetch_traces.sh mooncake` fetches it."
    )
    study_note = (
        f"`configs/agentic.yaml`, {SESSIONS} sessions at {RATE:g} sessions/s, HBM "
        f"{HBM_GIB:g} GiB; CPU tier {CPU_GIB:g} GiB at the A100's host link, disk "
        f"{DISK_GIB:g} GiB NVMe Gen4. The load columns are the wait on the TTFT path of the "
        "requests that loaded. Replicas: the fewest behind session affinity at "
        f"{FLEET_RATE:g} sessions/s with p99 TTFT within {SLO_TTFT_MS:,.0f} ms."
    )
    bw_note = (
        f"The Mooncake synthetic trace (`configs/mooncake.yaml`), HBM {MC_HBM_GIB:g} GiB, a CPU "
        "tier of 32 GiB; the curve column is `simkv cache-curve`'s hit rate at HBM + CPU "
        "blocks (an ideal LRU without concurrency: the simulation also hits blocks of requests "
        "still running, and loses the ones it could not keep)."
    )
    curve_head = ["trace", "bundled", "never evicting", "paper (whole trace)", "16 GiB",
                  "64 GiB", "256 GiB"]  # fmt: skip
    study_head = ["tiers", "prefix hit", "from tiers", "p50 TTFT ms", "p99 TTFT ms",
                  "load ms mean", "load ms p99", "goodput req/s", "replicas (SLO)"]  # fmt: skip
    bw_head = ["case", "CPU GB/s", "prefix hit (sim)", "curve", "mean TTFT ms", "p99 TTFT ms",
               "load ms mean"]  # fmt: skip
    parts = [
        "# KV offload tiers: the evidence", header,
        "## Hit rate against capacity on the Mooncake traces", curves_note,
        markdown_table(curve_head, curve_rows),
        "## What CPU and disk tiers buy an agentic workload", study_note,
        markdown_table(study_head, study),
        "## Bandwidth moves TTFT, capacity moves the hit rate", bw_note,
        markdown_table(bw_head, bw),
    ]  # fmt: skip
    return "\n\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    rows = curves()
    study = agentic_study()
    bw = bandwidth_and_capacity()
    text = render(rows, study, bw, time.perf_counter() - wall, time.process_time() - cpu)
    publish(text, DOC, args.write_docs)


if __name__ == "__main__":
    main()
