"""Measure what simkv's device preset for this CPU needs: one thread's fp32 GEMM rate and its
memory read bandwidth (the live runs of ``live.py`` use one OpenMP thread).

Runs inside the reference virtualenv (its torch)::

    .venv-vllm/bin/python tools/vllm_reference/cpu_device.py

Prints the best of five of: ``torch.mm`` of two n×n fp32 matrices (n = 512, 1024, 2048;
2n³ FLOPs), a sum over a 512 MiB fp32 tensor (bytes read) and a copy of it (bytes read and
written). ``simkv/presets/gpus/cpu-epyc-zen3-1t.yaml`` cites one such run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")


def best_of(call: Callable[[], object], reps: int = 5) -> float:
    call()
    best = float("inf")
    for _ in range(reps):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    import torch

    torch.set_num_threads(1)
    for n in (512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        took = best_of(lambda a=a, b=b: torch.mm(a, b))
        print(f"fp32 matmul {n}^3: {2 * n**3 / took / 1e9:.1f} GFLOP/s")
    x = torch.ones(128 * 1024 * 1024)
    y = torch.empty_like(x)
    print(f"fp32 sum, 512 MiB: {x.numel() * 4 / best_of(x.sum) / 1e9:.2f} GB/s read")
    copy = best_of(lambda: y.copy_(x))
    print(f"fp32 copy, 512 MiB: {2 * x.numel() * 4 / copy / 1e9:.2f} GB/s read + write")
    print(f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, "
          f"{os.cpu_count()} CPUs")  # fmt: skip


if __name__ == "__main__":
    main()
