"""Prompt content identity without token ids: runs of tokens ("segments") with ids.

A request's prompt is a sequence of segments ``(segment_id, length_tokens)``. Identity is
*chained*: token ``t`` of a prompt is identified by the whole list of segments before it plus
its offset in its own segment, so two prompts hold the same content in their first ``T`` tokens
exactly when their segment lists agree up to token ``T`` (same ids in the same order, the same
lengths for the segments that end before ``T``). This expresses:

* Mooncake ``hash_ids``: one segment of 512 tokens per id (the last one partial);
* shared system prompts and few-shot prefixes: a shared first segment, then a unique one;
* multi-turn chats: turn k's prompt = turn k-1's segments + the answer's segment (the id that
  turn k-1's generated tokens carry, ``output_ids``) + a new segment.

The mapping onto any block size is exact: :func:`block_keys` gives one chained key per full
block, equal for two requests exactly when their first ``(j + 1) * block_size`` tokens match.
Workload segment ids are non-negative. A request without content gets :class:`UniqueKeys`
(negative keys that only match themselves); content keys are non-negative.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Segments = Sequence[tuple[int, int]]


@dataclass(frozen=True)
class PromptContent:
    """Segments of every request of a workload, as CSR columns.

    Request ``i``'s segments are ``zip(seg_ids, seg_lens)[offsets[i]:offsets[i + 1]]`` and their
    lengths sum to its prompt length; ``output_ids[i]`` identifies its generated tokens.
    """

    seg_ids: np.ndarray
    seg_lens: np.ndarray
    offsets: np.ndarray
    output_ids: np.ndarray

    def __post_init__(self) -> None:
        if len(self.seg_ids) != len(self.seg_lens) or len(self.offsets) != len(self.output_ids) + 1:
            raise ValueError("PromptContent columns have inconsistent lengths")
        if len(self.seg_lens) and int(self.seg_lens.min()) < 1:
            raise ValueError("every segment holds at least one token")
        if int(self.offsets[0]) != 0 or np.any(np.diff(self.offsets) < 0):
            raise ValueError("offsets must start at 0 and be non-decreasing")

    def __len__(self) -> int:
        return len(self.output_ids)

    def segments(self, i: int) -> list[tuple[int, int]]:
        """Request ``i``'s segments ``[(segment_id, length_tokens), ...]``."""
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        return list(zip(self.seg_ids[lo:hi].tolist(), self.seg_lens[lo:hi].tolist(), strict=True))

    def prompt_tokens(self) -> np.ndarray:
        """Each request's prompt length implied by its segments (int64)."""
        totals = np.concatenate(([0], np.cumsum(self.seg_lens, dtype=np.int64)))
        return totals[self.offsets[1:]] - totals[self.offsets[:-1]]

    @classmethod
    def from_lists(cls, prompts: Sequence[Segments], output_ids: Sequence[int]) -> PromptContent:
        """Build from per-request segment lists."""
        lens = [len(p) for p in prompts]
        offsets = np.zeros(len(prompts) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum(lens)
        flat = [seg for p in prompts for seg in p]
        ids = np.array([s for s, _ in flat], dtype=np.int64)
        seg_lens = np.array([n for _, n in flat], dtype=np.int64)
        return cls(ids, seg_lens, offsets, np.asarray(output_ids, dtype=np.int64))


_KEY_MASK = (1 << 63) - 1  # content keys are ≥ 0; UniqueKeys are < 0, so the two never meet


class UniqueKeys:
    """Block keys of a request whose content nobody shares (a workload without content).

    Its keys only ever match themselves (a request re-admitted after a recompute preemption
    hits its own cached blocks), so they need no hashing: request ``r``'s block ``j`` has key
    ``-(r · 2^32 + j + 1)``, negative and distinct from every other request's and from every
    :class:`KeyStream` key. ``owner`` (the request id) says so to a prefix cache (the
    ``BlockKeys`` protocol of :mod:`simkv.kv.prefix_cache`), which may keep its blocks by owner.
    """

    __slots__ = ("owner",)

    def __init__(self, req_id: int) -> None:
        self.owner = req_id

    @property
    def keys(self) -> range:
        """Every key, lazily (a range)."""
        base = -(self.owner << 32) - 1
        return range(base, base - (1 << 32), -1)

    def extend(self, num_blocks: int) -> range:
        """``keys`` (they are all there already); the :class:`KeyStream` interface."""
        return self.keys


class KeyStream:
    """The chained block keys of one sequence (prompt, then its generated tokens), computed on
    demand and kept: ``extend(n)`` makes ``keys`` hold at least the first ``n`` full blocks.
    Other requests may share them (``owner`` is None: the ``BlockKeys`` protocol of
    :mod:`simkv.kv.prefix_cache`)."""

    owner: None = None  # shared content keys belong to no single request

    __slots__ = ("_block_size", "_offset", "_prev", "_seg", "_stream", "keys")

    def __init__(self, segments: Segments, output_id: int, block_size: int) -> None:
        self._stream = [*segments, (output_id, 1 << 62)]
        self._block_size = block_size
        self._seg = 0
        self._offset = 0
        self._prev = 0
        self.keys: list[int] = []

    def extend(self, num_blocks: int) -> list[int]:
        """Compute keys up to ``num_blocks`` full blocks; returns ``keys``."""
        keys, stream, bs = self.keys, self._stream, self._block_size
        while len(keys) < num_blocks:
            seg_id, length = stream[self._seg]
            start = self._offset
            if length - start > bs:  # the common case: the block lies inside one segment
                self._offset = start + bs
                self._prev = hash((self._prev, seg_id, start, start + bs)) & _KEY_MASK
                keys.append(self._prev)
                continue
            room, pieces = bs, []
            while room:
                seg_id, length = stream[self._seg]
                take = min(room, length - self._offset)
                pieces.append((seg_id, self._offset, self._offset + take))
                room -= take
                self._offset += take
                if self._offset == length:
                    self._seg, self._offset = self._seg + 1, 0
            self._prev = hash((self._prev, *[part for piece in pieces for part in piece]))
            self._prev &= _KEY_MASK
            keys.append(self._prev)
        return keys


def block_keys(segments: Segments, output_id: int, block_size: int, num_blocks: int) -> list[int]:
    """Chained keys of the first ``num_blocks`` full blocks of a sequence.

    The sequence is the prompt's segments followed by its generated tokens (segment
    ``output_id``). Key ``j`` hashes key ``j - 1`` with the pieces ``(segment_id, start, end)``
    that block ``j`` covers, so equal keys mean equal content of the whole prefix (up to hash
    collisions of 64-bit integers, which the simulation ignores).
    """
    return KeyStream(segments, output_id, block_size).extend(num_blocks)[:num_blocks]
