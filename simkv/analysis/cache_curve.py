"""Prefix-cache hit rate against cache capacity, for every capacity at once.

**The model** (an idealised prefix cache, block granularity): requests are taken one at a time
in workload order (arrival order; a session's later turns follow their first turn), with no
concurrency and no time. Request ``r`` with a prompt of ``P`` tokens and ``B = block_size``:

1. *lookup*: its first ``L = (P - 1) // B`` full blocks are looked up, and the hit is the
   longest run of leading blocks present (vLLM's ``KVCacheManager.get_computed_blocks``:
   whole blocks only, at most ``num_tokens - 1`` tokens, so a fully cached prompt still
   computes its last token, and, at a block boundary, its whole last block; simkv's
   :meth:`simkv.engine.memory.prefix.PrefixPart.cached_prefix` does the same);
2. *insert*: after its prefill its ``F = P // B`` full prompt blocks become the most recently
   used, its last block first and block 0 last, as vLLM's ``KVCacheManager.free`` frees a
   request's blocks tail first (so within a request, tail blocks are evicted first). Partial
   blocks are not cached, nor generated tokens unless asked (``output_tokens`` of
   :func:`prefix_cache_curve`: then the full blocks of prompt and output, as vLLM caches
   decode blocks too).

Block identity is :func:`simkv.workload.content.block_keys` (chained content keys, vLLM's
hashing rule), here through its vectorised twin :func:`simkv.workload.block_ids.block_ids`.
The cache holds ``C`` blocks and evicts the least recently used. Because LRU is a stack
algorithm, one pass of stack distances (:mod:`simkv.analysis.stack_distance`) gives the hits of
every ``C``: request ``r`` hits its leading block ``j`` at capacity ``C`` exactly when
``max(d_0 … d_j) ≤ C``, ``d_i`` the stack distance of its block ``i`` when it arrives. Under
the tail-first order that maximum is ``d_j`` itself: whenever block ``j`` of a prefix was used,
blocks ``0 … j - 1`` of the same prefix were used after it (keys are chained), so distances
never decrease along a request (:func:`_reach` checks it), and an LRU cache of any size holds
a prefix of a request's blocks, never a block without the ones before it.

**Against a running engine**: an engine's cache is smaller than its pool by the blocks running
requests hold, requests overlap (a request cannot hit blocks a concurrent one is still
computing, and a running request's blocks cannot be evicted), and its decode blocks are
cached too (here only with ``output_tokens``). So the curve is the hit rate of an ideal LRU
cache of ``C`` blocks, an upper bound's shape rather than an engine's measurement: read a
pool's capacity on it as "what this much cache could give", and ``simkv run`` for what an
engine with that pool gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from simkv.analysis.stack_distance import grouped_stack_distances
from simkv.kv.errors import InvariantViolation
from simkv.workload.block_ids import block_ids, with_outputs
from simkv.workload.content import PromptContent

CURVE_COLUMNS = ("capacity_blocks", "hit_tokens", "hit_rate", "request_hit_rate")


@dataclass(frozen=True)
class CacheCurve:
    """The hit rate of an LRU prefix cache of every capacity (the module docstring's model).

    ``table`` has one row per capacity at which the curve rises, after a first row at capacity
    0: ``capacity_blocks``, ``hit_tokens`` (prompt tokens found cached), ``hit_rate``
    (``hit_tokens`` / all prompt tokens) and ``request_hit_rate`` (the share of requests with
    at least one cached block). Between rows the curve is flat: the hit rate at capacity ``C``
    is the last row with ``capacity_blocks ≤ C`` (:meth:`at`). From ``distinct_blocks`` on
    nothing is ever evicted and the curve is at its maximum.
    """

    table: pd.DataFrame
    block_size: int
    requests: int
    prompt_tokens: int
    block_accesses: int
    distinct_blocks: int

    def at(self, capacity_blocks: int) -> pd.Series:
        """The row that holds at ``capacity_blocks`` (≥ 0)."""
        capacities = self.table["capacity_blocks"].to_numpy()
        row = int(np.searchsorted(capacities, capacity_blocks, side="right")) - 1
        return self.table.iloc[max(row, 0)]

    def sampled(self, max_rows: int) -> pd.DataFrame:
        """``table`` when it has at most ``max_rows`` rows, else the curve at about
        ``max_rows`` capacities: 0, then whole numbers of blocks on a geometric grid up to the
        last row's capacity (each row exact at its capacity; the steps between rows left out)."""
        if len(self.table) <= max_rows:
            return self.table
        last = int(self.table["capacity_blocks"].iloc[-1])
        grid = np.unique(np.rint(np.geomspace(1, last, max_rows - 1)).astype(np.int64))
        capacities = self.table["capacity_blocks"].to_numpy()
        rows = np.searchsorted(capacities, grid, side="right") - 1
        sampled = self.table.iloc[np.concatenate(([0], rows))].reset_index(drop=True)
        sampled["capacity_blocks"] = np.concatenate(([0], grid))
        return sampled

    @property
    def max_hit_rate(self) -> float:
        """The hit rate of a cache that never evicts."""
        return float(self.table["hit_rate"].iloc[-1])


def _reach(distance: np.ndarray, counts: np.ndarray, never: int) -> np.ndarray:
    """Per block, the capacity from which it and every block before it in its request hit
    (``counts[i]`` blocks of request ``i`` in order; a never-seen block, distance 0, hits
    from ``never``): its distance, as distances never decrease along a request (the module
    docstring; :class:`InvariantViolation` otherwise)."""
    reach = np.where(distance > 0, distance, never)
    inside = np.ones(len(reach), bool)  # whether block k follows a block of its own request
    inside[np.cumsum(counts[counts > 0])[:-1]] = False
    if len(reach) and np.any(np.diff(reach)[inside[1:]] < 0):
        raise InvariantViolation("a request hits a block without the blocks before it")
    return reach


def prefix_cache_curve(
    content: PromptContent, block_size: int, output_tokens: np.ndarray | None = None
) -> CacheCurve:
    """The curve of the requests of ``content`` taken in order (the module docstring).

    With ``output_tokens`` (one per request), a request also caches the full blocks of its
    generated tokens, as vLLM caches decode blocks: the first ``(P + O - 1) // B`` blocks of
    prompt and output are inserted (the last generated token's KV is never computed), which
    lets a multi-turn session's next prompt, resending the answer, hit it.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be ≥ 1, got {block_size}")
    prompt = content.prompt_tokens()
    full = prompt // block_size
    if output_tokens is not None:
        content = with_outputs(content, output_tokens)
        full = (prompt + np.asarray(output_tokens, np.int64) - 1) // block_size
    lookup = (prompt - 1) // block_size
    blocks = block_ids(content, block_size, full)
    request = np.repeat(np.arange(len(full), dtype=np.int64), full)
    j = np.arange(len(blocks.ids), dtype=np.int64) - blocks.starts[request]
    access = blocks.starts[request] + full[request] - 1 - j  # tail first, block 0 last
    keys = np.empty_like(blocks.ids)
    keys[access] = blocks.ids
    distance = grouped_stack_distances(keys, blocks.starts[request])[access]
    looked = j < lookup[request]
    reach = _reach(distance[looked], lookup, len(distance) + 1)
    lookup_starts = np.cumsum(lookup) - lookup
    first = reach[lookup_starts[lookup > 0]]
    return _curve(block_size, prompt, reach, first, len(distance), int((distance == 0).sum()))


def _curve(
    block_size: int,
    prompt: np.ndarray,
    reach: np.ndarray,
    first: np.ndarray,
    n: int,
    distinct: int,
) -> CacheCurve:
    """The table from the capacity from which each looked-up block hits (``reach``, > ``n``
    = never) and the same for each request's first block (``first``)."""
    capacities, block_hits = np.unique(reach[reach <= n], return_counts=True)
    first_caps = np.searchsorted(capacities, first[first <= n], side="left")
    request_hits = np.bincount(first_caps, minlength=len(capacities))
    total_tokens = int(prompt.sum())
    hit_tokens = np.concatenate(([0], np.cumsum(block_hits) * block_size))
    hit_requests = np.concatenate(([0], np.cumsum(request_hits)))
    table = pd.DataFrame(
        {
            "capacity_blocks": np.concatenate(([0], capacities)).astype(np.int64),
            "hit_tokens": hit_tokens.astype(np.int64),
            "hit_rate": hit_tokens / max(total_tokens, 1),
            "request_hit_rate": hit_requests / max(len(prompt), 1),
        }
    )
    return CacheCurve(
        table=table,
        block_size=block_size,
        requests=len(prompt),
        prompt_tokens=total_tokens,
        block_accesses=n,
        distinct_blocks=distinct,
    )
