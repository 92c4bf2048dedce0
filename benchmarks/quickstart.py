"""The quickstart end to end, as a user runs it: ``simkv run configs/quickstart.yaml``.

Runs the installed ``simkv`` entry point as a whole process ``--repeat`` times (interpreter
start, imports, simulation, frames, report), each into a fresh temporary folder, and prints
the wall seconds and the CPU seconds (user + system, the process and its children) of each,
with their minimum and median and the load average. On a shared machine the wall time follows
the load; the CPU time is what the run costs, and what its wall time is on an idle core (the
run is one Python thread). The target is 3.5 s. Usage::

    .venv/bin/python benchmarks/quickstart.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 3.5


def one_run(out: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one ``simkv run`` of the quickstart into ``out``."""
    simkv = Path(sys.executable).parent / "simkv"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([str(simkv), "run", "configs/quickstart.yaml", "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            wall, cpu = one_run(Path(tmp) / f"run{i}")
            walls.append(wall)
            cpus.append(cpu)
            print(f"run {i + 1}: wall {wall:.2f} s, CPU {cpu:.2f} s")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"wall: min {min(walls):.2f} s, median {statistics.median(walls):.2f} s")
    print(f"CPU:  min {min(cpus):.2f} s, median {statistics.median(cpus):.2f} s "
          f"(target {TARGET_S} s; load average {load}, {when})")  # fmt: skip


if __name__ == "__main__":
    main()
