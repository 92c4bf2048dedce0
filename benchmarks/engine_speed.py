"""Engine speed: wall seconds, simulated requests per wall second and peak RSS.

Cases: the bundled Azure LLM inference 2023 conversation trace (19,366 requests) under
``vllm_v1`` and ``vllm_v0``, and a 100k-request synthetic workload under ``vllm_v1``. Each case
runs in its own process so its peak RSS is its own. Usage::

    .venv/bin/python benchmarks/engine_speed.py [--cases azure-v1,azure-v0,synthetic-100k]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"

SYNTHETIC = [
    "workload={kind: synthetic, num_requests: 100000, arrival: {kind: poisson, rate: 20.0}, "
    "prompt_tokens: {kind: lognormal, mean: 600, median: 400, max: 3000}, "
    "output_tokens: {kind: lognormal, mean: 200, median: 120, max: 1000}}",
]
CASES: dict[str, list[str]] = {
    "azure-v1": [],
    "azure-v0": ["scheduler.kind=vllm_v0"],
    "synthetic-100k": SYNTHETIC,
}


def _one(case: str) -> dict[str, float | int | str]:
    from simkv.run import load_config, simulate

    cfg = load_config(QUICKSTART, CASES[case])
    started = time.perf_counter()
    out = simulate(cfg, QUICKSTART.parent)
    wall = time.perf_counter() - started
    n = int(out.summary["num_requests"] or 0)
    return {
        "case": case,
        "requests": n,
        "steps": int(out.summary["num_steps"] or 0),
        "wall_s": round(wall, 2),
        "requests_per_wall_s": round(n / wall),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one(args.one)))
        return
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"{os.cpu_count()} logical CPUs, load average {load} at start, {when}")  # fmt: skip
    print(f"{'case':<16}{'requests':>10}{'steps':>10}{'wall s':>9}{'req/wall s':>12}{'RSS MiB':>9}")
    for case in args.cases.split(","):
        done = subprocess.run(
            [sys.executable, __file__, "--one", case], capture_output=True, text=True, check=True
        )
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{r['case']:<16}{r['requests']:>10,}{r['steps']:>10,}{r['wall_s']:>9}"
            f"{r['requests_per_wall_s']:>12,}{r['peak_rss_mib']:>9}"
        )


if __name__ == "__main__":
    main()
