"""Fleet speed: a 16-replica fleet on the Azure conv trace at 16× its rate against one replica
at its own rate, in wall seconds; the fleet should take at most 16× the single replica's time.

Both serve the bundled Azure LLM inference 2023 conversation trace (19,366 requests,
``configs/quickstart.yaml``: Llama-2-7B, A100-80GB, ``vllm_v1``); the fleet's arrivals are
16× denser (``workload.time_scale=0.0625``), so each replica sees about the single replica's
load. Each case runs in its own process (no warm caches shared). The router ``pd`` is a
prefill/decode fleet of the same size (half prefill, half decode replicas, ``least_outstanding``
on both sides, KV over InfiniBand NDR): it should take at most 2× the colocated fleets' time.
Usage::

    .venv/bin/python benchmarks/fleet_speed.py [--replicas 16] [--routers round_robin,...,pd]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"


def _overrides(replicas: int, router: str) -> list[str]:
    if replicas == 1 and router == "none":
        return []
    if router == "pd":
        half = replicas // 2
        return [
            f"workload.time_scale={1.0 / replicas!r}",
            "fleet={router: {kind: least_outstanding}, disaggregation: {link: ib_ndr}, "
            f"replicas: [{{role: prefill, count: {half}}}, "
            f"{{role: decode, count: {replicas - half}}}]}}",
        ]
    return [
        f"workload.time_scale={1.0 / replicas!r}",
        f"fleet={{router: {{kind: {router}}}, replicas: [{{count: {replicas}}}]}}",
    ]


def _one(replicas: int, router: str) -> dict[str, float | int | str | None]:
    from simkv.run import load_config, simulate

    cfg = load_config(QUICKSTART, _overrides(replicas, router))
    started = time.perf_counter()
    out = simulate(cfg, QUICKSTART.parent)
    wall = time.perf_counter() - started
    s = out.summary
    return {
        "replicas": replicas,
        "router": router,
        "requests": int(s["num_requests"] or 0),
        "steps": int(s["num_steps"] or 0),
        "wall_s": round(wall, 2),
        "p99_ttft_ms": round(s["p99_ttft_ms"] or 0.0, 1),
        "imbalance": None if s.get("outstanding_imbalance") is None
        else round(float(s["outstanding_imbalance"] or 0.0), 3),
    }  # fmt: skip


def _run(replicas: int, router: str) -> dict[str, float | int | str | None]:
    """One case in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, __file__, "--one", f"{replicas}:{router}"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=16)
    parser.add_argument("--routers", default="round_robin,least_outstanding,pd")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        replicas, router = args.one.split(":")
        print(json.dumps(_one(int(replicas), router)))
        return
    single = _run(1, "none")
    rows = [single] + [_run(args.replicas, r) for r in args.routers.split(",") if r]
    print("| replicas | router | requests | steps | wall s | × single | p99 TTFT ms | imbalance |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        ratio = float(row["wall_s"] or 0) / float(single["wall_s"] or 1)
        print(
            f"| {row['replicas']} | {row['router']} | {row['requests']:,} | {row['steps']:,} "
            f"| {row['wall_s']} | {ratio:.2f} | {row['p99_ttft_ms']} | {row['imbalance']} |"
        )
    colocated = [r for r in rows[1:] if r["router"] != "pd"]
    worst = max(float(r["wall_s"] or 0) for r in colocated) / float(single["wall_s"] or 1)
    verdict = "within" if worst <= args.replicas else "OVER"
    bound = f"{verdict} the {args.replicas}× bound"
    print(f"\nslowest colocated fleet: {worst:.2f}× the single replica ({bound})")
    split = [r for r in rows[1:] if r["router"] == "pd"]
    if split and colocated:
        ratio = float(split[0]["wall_s"] or 0) / min(float(r["wall_s"] or 1) for r in colocated)
        verdict = "within" if ratio <= 2 else "OVER"
        print(f"prefill/decode fleet: {ratio:.2f}× the fastest colocated one ({verdict} 2×)")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"load average {load} at the end, {os.cpu_count()} logical CPUs, {when}")


if __name__ == "__main__":
    main()
