"""Free queues: the blocks with refcount 0, in the order an allocator reuses them.

The order *is* the eviction policy of a prefix cache built on a queue. :class:`OrderedFreeQueue`
(FIFO or LIFO, any block removable in O(1)) is the reference; :class:`FifoFreeQueue` is the
fast FIFO one and :class:`LifoFreeQueue` the fast LIFO one without removals, checked against it
by ``tests/kv/test_free_queue.py``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from enum import StrEnum
from typing import NewType, Protocol

BlockId = NewType("BlockId", int)
"""Index of a physical block in one allocator, ``0 <= id < num_blocks``."""


class ReuseOrder(StrEnum):
    """Which freed block ``alloc`` hands out next.

    ``FIFO``: a freed block joins the tail of the free queue and is reused last (the seed
    notebook's behaviour, and vLLM 0.11's free queue). ``LIFO``: a freed block joins the head and
    is reused first. ``SPLIT``: a freed block without cached content joins the head, a cached
    one the tail (vLLM 0.32 ``v1/core/block_pool.py`` ``BlockPool.free_blocks``: LIFO reuse of
    uncached blocks, FIFO eviction of cached ones); without a prefix cache no block holds
    content, so it is ``LIFO``.
    """

    FIFO = "fifo"
    LIFO = "lifo"
    SPLIT = "split"


class FreeQueue(Protocol):
    """The blocks with refcount 0, in the order ``alloc`` reuses them.

    The order *is* the eviction policy of a prefix cache: a cache-aware queue (see
    ``prefix_cache.py``) forgets a block's cached content when ``pop`` hands the block out.
    ``push_many`` and ``remove_many`` carry what such a cache notes about a whole request's blocks
    (``owner``, ``registered``: see :class:`~simkv.kv.prefix_cache.PrefixCache`); a plain queue
    ignores them.
    """

    def pop(self) -> BlockId:
        """Remove and return the block to reuse next (the queue is not empty)."""
        ...

    def push(self, block_id: BlockId) -> None:
        """A block's refcount reached 0."""
        ...

    def pop_many(self, n: int) -> list[BlockId]:
        """``[pop() for _ in range(n)]`` (the queue holds at least ``n``)."""
        ...

    def push_many(
        self, block_ids: Sequence[BlockId], owner: int | None = None, registered: int = 0
    ) -> None:
        """``push`` each of ``block_ids`` in order. With ``owner``: they are every block of
        request ``owner``, last block first, and its first ``registered`` blocks are registered
        in the prefix cache."""
        ...

    def remove(self, block_id: BlockId) -> None:
        """A free block is taken back (a prefix-cache hit revives it)."""
        ...

    def remove_many(self, block_ids: Sequence[BlockId], owner: int | None = None) -> None:
        """``remove`` each of ``block_ids``. With ``owner``: they are the blocks of request
        ``owner`` that the cache's lookup for it returned, and it takes them all back."""
        ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[BlockId]: ...


class OrderedFreeQueue:
    """FIFO or LIFO free queue with O(1) push, pop and removal of any block."""

    __slots__ = ("_lifo", "_queue")

    def __init__(self, block_ids: Iterable[int], reuse: ReuseOrder | str = ReuseOrder.FIFO) -> None:
        self._queue: OrderedDict[BlockId, None] = OrderedDict.fromkeys(map(BlockId, block_ids))
        self._lifo = ReuseOrder(reuse) is ReuseOrder.LIFO

    def pop(self) -> BlockId:
        return self._queue.popitem(last=False)[0]

    def push(self, block_id: BlockId) -> None:
        self._queue[block_id] = None
        if self._lifo:
            self._queue.move_to_end(block_id, last=False)

    def pop_many(self, n: int) -> list[BlockId]:
        popitem = self._queue.popitem
        return [popitem(False)[0] for _ in range(n)]

    def push_many(
        self, block_ids: Sequence[BlockId], owner: int | None = None, registered: int = 0
    ) -> None:
        queue = self._queue
        if self._lifo:
            for block_id in block_ids:
                queue[block_id] = None
                queue.move_to_end(block_id, last=False)
        else:
            for block_id in block_ids:  # (faster than OrderedDict.update)
                queue[block_id] = None

    def push_front_many(self, block_ids: Sequence[BlockId]) -> None:
        """Put ``block_ids`` at the head, in order: ``block_ids[0]`` is reused next (vLLM's
        ``FreeKVCacheBlockQueue.prepend_n``)."""
        queue = self._queue
        for block_id in reversed(block_ids):
            queue[block_id] = None
            queue.move_to_end(block_id, last=False)

    def remove(self, block_id: BlockId) -> None:
        del self._queue[block_id]

    def remove_many(self, block_ids: Sequence[BlockId], owner: int | None = None) -> None:
        for block_id in block_ids:
            del self._queue[block_id]

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[BlockId]:
        return iter(self._queue)


class FifoFreeQueue:
    """FIFO free queue on a list with a moving head: pushes append, pops advance the head, and
    bulk pops and pushes are single slice / extend operations (C speed).

    **Positions.** Every entry ever queued has an absolute position: the initial blocks are at
    ``0 … n - 1`` and each push appends at :attr:`end_position`. :attr:`head_position` counts the
    entries consumed (popped or skipped). Under FIFO an entry at position ``p`` is handed out
    exactly when a pop moves the head past ``p`` (unless its block was taken back first), so a
    caller that remembers where it pushed a run of blocks (a prefix cache's note, see
    ``prefix_cache.py``) knows which of them are still queued without any per-block state.
    Positions survive compaction (consumed entries are dropped from the list when they outnumber
    the live ones).

    **Removal** (a prefix-cache hit takes a free block back) is lazy: the entry stays queued and
    is skipped when it reaches the head. Under FIFO a block's dead entries are always older than
    its live one, so ``_stale[b]`` (dead entries of ``b`` still queued) tells which to skip, and a
    popped run holds a dead entry exactly when it shares a block with ``_stale`` (one C-level
    ``isdisjoint``). Same order and contents as :class:`OrderedFreeQueue` (FIFO);
    ``tests/kv/test_free_queue.py`` checks this on random operation sequences.
    """

    __slots__ = ("_base", "_head", "_len", "_queue", "_stale")

    def __init__(self, block_ids: Iterable[int]) -> None:
        self._queue: list[BlockId] = list(map(BlockId, block_ids))
        self._base = 0  # absolute position of _queue[0]
        self._head = 0  # entries before it are consumed
        self._len = len(self._queue)
        self._stale: dict[BlockId, int] = {}

    @property
    def head_position(self) -> int:
        """Entries consumed so far: the next pop starts at this absolute position."""
        return self._base + self._head

    @property
    def end_position(self) -> int:
        """Entries queued so far: the next push lands at this absolute position."""
        return self._base + len(self._queue)

    def _compact(self) -> None:
        if self._head > 4096 and self._head > len(self._queue) // 2:
            del self._queue[: self._head]
            self._base += self._head
            self._head = 0

    def pop(self) -> BlockId:
        return self.pop_many(1)[0]

    def push(self, block_id: BlockId) -> None:
        self._queue.append(block_id)
        self._len += 1

    def pop_many(self, n: int) -> list[BlockId]:
        queue, head, stale = self._queue, self._head, self._stale
        blocks = queue[head : head + n]
        self._head = head + n
        if stale and not stale.keys().isdisjoint(blocks):
            blocks = self._skip_dead(blocks, n)  # some popped entries are dead: skip them
        elif len(blocks) != n:
            raise IndexError("pop from an empty free queue")
        self._len -= n
        if self._head > 4096:
            self._compact()
        return blocks

    def _skip_dead(self, chunk: list[BlockId], n: int) -> list[BlockId]:
        """:meth:`pop_many`'s live blocks when ``chunk`` (the entries it took) holds dead
        ones: drop those and take more entries until ``n`` are live."""
        queue, stale, blocks = self._queue, self._stale, []
        while True:
            for block_id in chunk:
                dead = stale.get(block_id)
                if dead is None:
                    blocks.append(block_id)
                elif dead == 1:
                    del stale[block_id]
                else:
                    stale[block_id] = dead - 1
            take = n - len(blocks)
            if not take:
                return blocks
            chunk = queue[self._head : self._head + take]
            if not chunk:
                raise IndexError("pop from an empty free queue")
            self._head += take

    def push_many(
        self, block_ids: Sequence[BlockId], owner: int | None = None, registered: int = 0
    ) -> None:
        """Push ``block_ids`` in order (``owner`` and ``registered`` are for a prefix cache;
        ignored here)."""
        self._queue.extend(block_ids)
        self._len += len(block_ids)

    def remove(self, block_id: BlockId) -> None:
        self._stale[block_id] = self._stale.get(block_id, 0) + 1
        self._len -= 1

    def remove_many(self, block_ids: Sequence[BlockId], owner: int | None = None) -> None:
        """``remove`` each of ``block_ids`` (``owner`` is for a prefix cache; ignored here)."""
        stale = self._stale
        for block_id in block_ids:
            stale[block_id] = stale.get(block_id, 0) + 1
        self._len -= len(block_ids)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[BlockId]:
        stale = dict(self._stale)
        for block_id in self._queue[self._head :]:
            dead = stale.get(block_id)
            if dead:
                stale[block_id] = dead - 1
            else:
                yield block_id


class LifoFreeQueue:
    """LIFO free queue on a list used as a stack, its end the head: pushes append, pops take
    from the end, bulk pops and pushes are one slice / ``extend`` (C speed). Same order and
    contents as :class:`OrderedFreeQueue` under LIFO (``tests/kv/test_free_queue.py``).

    Removal is O(n) (``list.remove``): this queue is for an allocator without a prefix cache,
    which never takes a free block back; a cache under LIFO gets :class:`OrderedFreeQueue`.
    """

    __slots__ = ("_stack",)

    def __init__(self, block_ids: Iterable[int]) -> None:
        self._stack: list[BlockId] = list(map(BlockId, block_ids))
        self._stack.reverse()  # the first block on top

    def pop(self) -> BlockId:
        return self._stack.pop()

    def push(self, block_id: BlockId) -> None:
        self._stack.append(block_id)

    def pop_many(self, n: int) -> list[BlockId]:
        stack = self._stack
        if n > len(stack):
            raise IndexError("pop from an empty free queue")
        if n <= 1:
            return [stack.pop()] if n == 1 else []
        blocks = stack[-n:]
        del stack[-n:]
        blocks.reverse()
        return blocks

    def push_many(
        self, block_ids: Sequence[BlockId], owner: int | None = None, registered: int = 0
    ) -> None:
        """Push ``block_ids`` in order: the last one becomes the head (``owner`` and
        ``registered`` are for a prefix cache; ignored here)."""
        self._stack.extend(block_ids)

    def remove(self, block_id: BlockId) -> None:
        self._stack.remove(block_id)

    def remove_many(self, block_ids: Sequence[BlockId], owner: int | None = None) -> None:
        for block_id in block_ids:
            self._stack.remove(block_id)

    def __len__(self) -> int:
        return len(self._stack)

    def __iter__(self) -> Iterator[BlockId]:
        return reversed(self._stack)


def make_free_queue(
    block_ids: Iterable[int], reuse: ReuseOrder | str = ReuseOrder.FIFO, *, removals: bool = True
) -> FreeQueue:
    """The fastest free queue for ``reuse``: :class:`FifoFreeQueue`, or under LIFO (and SPLIT,
    which a queue without cached content is) :class:`OrderedFreeQueue` (O(1) removal, for a
    prefix cache) or, with ``removals=False`` (a plain allocator), :class:`LifoFreeQueue`."""
    if ReuseOrder(reuse) is ReuseOrder.SPLIT:
        reuse = ReuseOrder.LIFO
    if ReuseOrder(reuse) is ReuseOrder.FIFO:
        return FifoFreeQueue(block_ids)
    if not removals:
        return LifoFreeQueue(block_ids)
    return OrderedFreeQueue(block_ids, reuse)
