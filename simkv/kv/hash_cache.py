"""vLLM's hash-based automatic prefix caching over a FIFO, LIFO or split free queue.

A :class:`~simkv.kv.prefix_cache.PrefixCache`; see ``prefix_cache.py`` for the contract.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence

from simkv.kv.errors import InvariantViolation
from simkv.kv.free_queue import (
    BlockId,
    FifoFreeQueue,
    FreeQueue,
    OrderedFreeQueue,
    ReuseOrder,
    make_free_queue,
)
from simkv.kv.prefix_cache import BlockKeys


class _Note:
    """Where one request with private keys left its registered blocks in the free queue.

    ``blocks[j]`` (its ``j``-th block) entered the queue at position ``end - 1 - j`` (a request
    frees its tail first); positions ``start … end - 1`` are not yet passed by the queue's head
    as of the last pop (``start`` starts at ``end - len(blocks)``; ``start == end`` once the
    blocks were taken back, or all evicted).
    """

    __slots__ = ("blocks", "end", "owner", "start")

    def __init__(self, owner: int, blocks: list[BlockId], end: int) -> None:
        self.owner = owner
        self.blocks = blocks
        self.end = end
        self.start = end - len(blocks)


class HashPrefixCache:
    """vLLM 0.11 hash-based prefix cache over a FIFO (or LIFO) free queue.

    A request's blocks are freed tail first, so the least recently used block (and, within a
    request, its last block) is evicted first; a hit on a free cached block takes it off the
    queue.

    Invariants: ``block_of`` (key → block) and ``key_of`` (block → key, ``None`` when the block
    holds nothing cached; a list indexed by block id) are inverse maps (but for the shared keys
    of split reuse, below); a cached block is either
    in use (refcount ≥ 1) or in the free queue; ``pop`` evicts the block it returns.

    Requests with private keys (``BlockKeys.owner`` set: keys only they can hit) are kept
    without any per-block entry under FIFO reuse (``by_owner``): their registration is a count
    (``_owned``); when one frees its blocks, ``push_many`` gets its ``owner`` and records a
    :class:`_Note` keyed by that id: which blocks held its keys and at which queue positions
    they entered (:attr:`FifoFreeQueue.head_position` / ``end_position``). Popping past noted
    positions counts evictions; a lookup is the part of the note the head has not passed; the
    owner taking them back (``remove_many`` with its ``owner``) drops the note. A note is also
    dropped once the head has passed it all, so at most one note per queued run of blocks is
    kept (memory bounded by the pool, however many requests a run has). This is the same cache:
    under FIFO a freed request's blocks are evicted last block first, so what survives of it is
    always a prefix and every registration succeeds (no key is ever held twice).
    ``tests/engine/test_prefix_engine.py`` runs engines both ways and compares.

    Under ``SPLIT`` reuse (vLLM 0.32 ``BlockPool.free_blocks``) a freed block that holds no
    key goes to the head of the queue, in the order freed, and a cached one to the tail: blocks
    without content are reused before any cached block is evicted. There a key may also be held
    by several blocks, as vLLM's ``BlockHashToBlockMap`` allows (a block filled with content
    another block already caches, e.g. a recomputed prefix): ``block_of`` names the first,
    ``_dups`` the others in the order cached; a lookup finds the first, and when it is evicted
    the next takes its place. Elsewhere the first block to cache a key keeps it alone.
    """

    def __init__(
        self, num_blocks: int, reuse: ReuseOrder | str = ReuseOrder.FIFO, by_owner: bool = True
    ) -> None:
        # split: one ordered queue, pushed at either end (push_many)
        self._split = ReuseOrder(reuse) is ReuseOrder.SPLIT
        queue = (
            OrderedFreeQueue(range(num_blocks)) if self._split
            else make_free_queue(range(num_blocks), reuse)
        )  # fmt: skip
        self._queue: FreeQueue = queue
        # the queue when requests with private keys are kept by owner (FIFO reuse only)
        self._fifo = queue if by_owner and isinstance(queue, FifoFreeQueue) else None
        self.by_owner = self._fifo is not None
        self.block_of: dict[int, BlockId] = {}
        self.key_of: list[int | None] = [None] * num_blocks
        self.evictions = 0
        self._owned = 0  # cached blocks of requests kept by owner (not in block_of)
        self._notes: dict[int, _Note] = {}  # owner → its latest note, while it can be hit
        self._queued: deque[_Note] = deque()  # notes with positions ahead of the head, in order
        # split reuse: key → its other blocks, oldest first (the class docstring)
        self._dups: dict[int, list[BlockId]] | None = {} if self._split else None
        # the keys evicted, in order, when a KV tier stores on eviction (simkv.engine.tiers)
        self.evicted_keys: list[int] | None = None

    # -- free queue ---------------------------------------------------------------------------
    def pop(self) -> BlockId:
        return self.pop_many(1)[0]

    def push(self, block_id: BlockId) -> None:
        if self._split:
            self._push_split([block_id])
        else:
            self._queue.push(block_id)

    def pop_many(self, n: int) -> list[BlockId]:
        blocks = self._queue.pop_many(n)
        if self._dups:
            self._evict_shared(blocks)
        elif self.block_of:
            key_of, block_of, evicted = self.key_of, self.block_of, 0
            sink = self.evicted_keys
            for block in blocks:
                key = key_of[block]
                if key is not None:
                    key_of[block] = None
                    del block_of[key]
                    evicted += 1
                    if sink is not None:
                        sink.append(key)
            self.evictions += evicted
        fifo = self._fifo
        if fifo is not None and self._queued:
            self._passed(fifo.head_position)
        return blocks

    def _evict_shared(self, blocks: list[BlockId]) -> None:
        """:meth:`pop_many`'s evictions when some keys are held by several blocks."""
        key_of, block_of, dups = self.key_of, self.block_of, self._dups
        if dups is None:
            raise InvariantViolation("shared keys outside a split free queue")
        for block in blocks:
            key = key_of[block]
            if key is None:
                continue
            key_of[block] = None
            self.evictions += 1
            others = dups.get(key)
            if others is None:
                del block_of[key]
                if self.evicted_keys is not None:  # (else another block still holds it)
                    self.evicted_keys.append(key)
            elif block_of[key] == block:  # the next copy takes its place
                block_of[key] = others.pop(0)
            else:
                others.remove(block)
            if others is not None and not others:
                del dups[key]

    def _passed(self, head: int) -> None:
        """The queue's head moved to ``head``: the noted positions it passed were evicted."""
        queued, evicted = self._queued, 0
        while queued:
            note = queued[0]
            if note.start >= head:
                break
            if note.end > head:
                evicted += head - note.start
                note.start = head
                break
            evicted += note.end - note.start
            queued.popleft()
            if self._notes.get(note.owner) is note:
                del self._notes[note.owner]
        self._owned -= evicted
        self.evictions += evicted

    def push_many(
        self, block_ids: Sequence[BlockId], owner: int | None = None, registered: int = 0
    ) -> None:
        """Push ``block_ids`` in order; with ``owner`` (kept by owner), note its ``registered``
        leading blocks (the last ones pushed) in place of its previous note."""
        fifo = self._fifo
        if owner is None or fifo is None:
            if self._split:
                self._push_split(block_ids)
            else:
                self._queue.push_many(block_ids)
            return
        fifo.push_many(block_ids)
        if not registered:
            self._notes.pop(owner, None)
            return
        note = _Note(owner, list(block_ids[: -registered - 1 : -1]), fifo.end_position)
        self._notes[owner] = note
        self._queued.append(note)

    def _push_split(self, block_ids: Sequence[BlockId]) -> None:
        """Blocks without a key to the head (in order), cached ones to the tail."""
        queue, key_of = self._queue, self.key_of
        if not isinstance(queue, OrderedFreeQueue):
            raise InvariantViolation("a split free queue must be an OrderedFreeQueue")
        queue.push_front_many([b for b in block_ids if key_of[b] is None])
        queue.push_many([b for b in block_ids if key_of[b] is not None])

    def remove_many(self, block_ids: Sequence[BlockId], owner: int | None = None) -> None:
        """``remove`` each of ``block_ids``; with ``owner`` (kept by owner) they are its note's
        blocks still queued, all of them (what :meth:`lookup_stream` returned), and the note is
        dropped."""
        if owner is not None and self._fifo is not None:
            note, hits = self._notes.get(owner), list(block_ids)
            if note is None or note.blocks[: self._surviving(note)] != hits:
                raise InvariantViolation(f"request {owner} takes back blocks it has no note of")
            del self._notes[owner]
            note.start = note.end  # taken back, not evicted
        self._queue.remove_many(block_ids)

    def remove(self, block_id: BlockId) -> None:
        self._queue.remove(block_id)

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[BlockId]:
        return iter(self._queue)

    # -- cache --------------------------------------------------------------------------------
    def lookup(self, keys: Sequence[int]) -> list[BlockId]:
        """Blocks of the longest cached prefix of ``keys`` (stops at the first miss)."""
        hits: list[BlockId] = []
        block_of = self.block_of
        for key in keys:
            block = block_of.get(key)
            if block is None:
                break
            hits.append(block)
        return hits

    def lookup_stream(self, keys: BlockKeys, limit: int) -> list[BlockId]:
        """:meth:`lookup` of a request's first ``limit`` block keys."""
        owner = keys.owner
        if owner is None or self._fifo is None:
            return self.lookup(keys.extend(limit)[:limit])
        note = self._notes.get(owner)
        return [] if note is None else note.blocks[: min(self._surviving(note), limit)]

    def _surviving(self, note: _Note) -> int:
        """How many of a note's blocks the queue's head has not passed (its first ones: they
        entered the queue last)."""
        head = self._fifo.head_position if self._fifo is not None else 0
        return max(0, note.end - max(head, note.start))

    def insert(self, key: int, block: BlockId) -> bool:
        """Cache a full, computed block; False if the key is cached already (first one wins;
        under split reuse the block then holds the key as well, the class docstring)."""
        if self.key_of[block] is not None:
            return False
        if key in self.block_of:
            if self._dups is not None:
                self.key_of[block] = key
                self._dups.setdefault(key, []).append(block)
            return False
        self.block_of[key] = block
        self.key_of[block] = key
        return True

    def insert_stream(
        self, keys: BlockKeys, blocks: Sequence[BlockId], start: int, stop: int
    ) -> None:
        """``insert`` blocks ``start`` to ``stop - 1`` of one request (``blocks[j]`` holds its
        ``j``-th block key)."""
        if self._fifo is not None and keys.owner is not None:
            self._owned += stop - start  # noted when the blocks are freed (push_many)
            return
        key_list, block_of, key_of = keys.extend(stop), self.block_of, self.key_of
        dups = self._dups
        for j in range(start, stop):
            key, block = key_list[j], blocks[j]
            if key_of[block] is not None:
                continue
            if key not in block_of:
                block_of[key] = block
                key_of[block] = key
            elif dups is not None:
                key_of[block] = key
                dups.setdefault(key, []).append(block)

    def owned_filled(self, n: int) -> None:
        """``n`` requests kept by owner each filled one more block (registered by count)."""
        self._owned += n

    @property
    def cached_blocks(self) -> int:
        shared = sum(map(len, self._dups.values())) if self._dups else 0
        return len(self.block_of) + self._owned + shared
