"""Time ``simkv cache-curve``'s computation on a synthetic workload of a million requests.

Each request is a system prompt drawn Zipf-like from a pool of shared prompts (one segment
of 32..256 tokens), then a unique question (16..128 tokens): about 10 million block accesses
at block size 16. Prints the wall time of each stage; writes nothing.

    .venv/bin/python benchmarks/cache_curve.py [--requests N] [--block-size B]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from simkv.analysis.cache_curve import prefix_cache_curve
from simkv.workload.content import PromptContent


def synthetic_content(requests: int, seed: int = 0) -> PromptContent:
    """Two segments per request: a shared system prompt, then a unique question."""
    rng = np.random.default_rng(seed)
    pool = 10_000
    system_len = rng.integers(32, 257, size=pool)
    system = np.minimum(rng.zipf(1.2, size=requests) - 1, pool - 1)
    question_len = rng.integers(16, 129, size=requests)
    seg_ids = np.empty(2 * requests, np.int64)
    seg_lens = np.empty(2 * requests, np.int64)
    seg_ids[0::2], seg_ids[1::2] = system, pool + np.arange(requests)
    seg_lens[0::2], seg_lens[1::2] = system_len[system], question_len
    offsets = 2 * np.arange(requests + 1, dtype=np.int64)
    outputs = pool + requests + np.arange(requests, dtype=np.int64)
    return PromptContent(seg_ids, seg_lens, offsets, outputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--block-size", type=int, default=16)
    args = parser.parse_args()
    start = time.perf_counter()
    content = synthetic_content(args.requests)
    built = time.perf_counter()
    curve = prefix_cache_curve(content, args.block_size)
    done = time.perf_counter()
    print(f"requests        {curve.requests:,}")
    print(f"block accesses  {curve.block_accesses:,} ({curve.distinct_blocks:,} distinct)")
    print(f"curve rows      {len(curve.table):,}")
    print(f"max hit rate    {curve.max_hit_rate:.3f}")
    print(f"workload built  {built - start:.1f} s")
    print(f"curve computed  {done - built:.1f} s")


if __name__ == "__main__":
    main()
