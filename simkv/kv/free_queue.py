"""Free queues: the blocks with refcount 0, in the order an allocator reuses them.

The order *is* the eviction policy of a prefix cache built on a queue. :class:`OrderedFreeQueue`
(FIFO or LIFO, any block removable in O(1)) is the reference; :class:`FifoFreeQueue` is the
fast FIFO one, checked against it by ``tests/kv/test_free_queue.py``.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Sequence
from enum import StrEnum
from typing import NewType, Protocol

BlockId = NewType("BlockId", int)
"""Index of a physical block in one allocator, ``0 <= id < num_blocks``."""
DEAD = BlockId(-1)  # a FifoFreeQueue entry whose block was taken back (remove_range)


class ReuseOrder(StrEnum):
    """Which freed block ``alloc`` hands out next.

    ``FIFO``: a freed block joins the tail of the free queue and is reused last (the seed
    notebook's behaviour, and vLLM v1's free queue). ``LIFO``: a freed block joins the head and
    is reused first.
    """

    FIFO = "fifo"
    LIFO = "lifo"


class FreeQueue(Protocol):
    """The blocks with refcount 0, in the order ``alloc`` reuses them.

    The order *is* the eviction policy of a prefix cache: a cache-aware queue (see
    ``prefix_cache.py``) forgets a block's cached content when ``pop`` hands the block out.
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

    def push_many(self, block_ids: Sequence[BlockId]) -> None:
        """``push`` each of ``block_ids`` in order."""
        ...

    def remove(self, block_id: BlockId) -> None:
        """A free block is taken back (a prefix-cache hit revives it)."""
        ...

    def remove_many(self, block_ids: Sequence[BlockId]) -> None:
        """``remove`` each of ``block_ids``."""
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

    def push_many(self, block_ids: Sequence[BlockId]) -> None:
        queue = self._queue
        if self._lifo:
            for block_id in block_ids:
                queue[block_id] = None
                queue.move_to_end(block_id, last=False)
        else:
            for block_id in block_ids:  # (faster than OrderedDict.update)
                queue[block_id] = None

    def remove(self, block_id: BlockId) -> None:
        del self._queue[block_id]

    def remove_many(self, block_ids: Sequence[BlockId]) -> None:
        for block_id in block_ids:
            del self._queue[block_id]

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[BlockId]:
        return iter(self._queue)


class FifoFreeQueue:
    """FIFO free queue on a list with a moving head: pushes append, pops advance the head, and
    bulk pops and pushes are single slice / extend operations (C speed).

    Removing a block from the middle (a prefix-cache hit revives it) is lazy: the dead entry
    stays queued and is skipped when it reaches the head. Under FIFO a block's dead entries are
    always older than its live one, so ``_stale[b]`` (dead entries of ``b`` still queued) tells
    which to skip. Consumed entries are dropped when they outnumber the live ones. Same order
    and contents as :class:`OrderedFreeQueue` (FIFO); ``tests/kv/test_free_queue.py`` checks
    this on random operation sequences.

    Entries have absolute positions (``head_position`` … ``end_position``). A push may *mark*
    its last entries (a prefix cache's blocks that hold content); ``marked_popped`` counts the
    marked entries popped so far, found by position ranges rather than per block. A mark whose
    entries are taken back must be dropped (:meth:`unmark`) before they reach the head.
    A run of queued positions whose blocks are all taken back at once (:meth:`remove_range`)
    is overwritten with ``DEAD`` (one slice assignment) and skipped the same way.
    """

    __slots__ = ("_base", "_dead", "_head", "_len", "_marks", "_queue", "_stale", "marked_popped")

    def __init__(self, block_ids: Iterable[int]) -> None:
        self._queue: list[BlockId] = list(map(BlockId, block_ids))
        self._base = 0  # absolute position of _queue[0]
        self._head = 0  # entries before it are consumed
        self._len = len(self._queue)
        self._stale: dict[BlockId, int] = {}
        self._dead = 0  # DEAD entries at or after the head (remove_range)
        self._marks: deque[list[int]] = deque()  # [start, end) absolute, increasing
        self.marked_popped = 0

    @property
    def head_position(self) -> int:
        return self._base + self._head

    @property
    def end_position(self) -> int:
        return self._base + len(self._queue)

    def _compact(self) -> None:
        if self._head > 4096 and self._head > len(self._queue) // 2:
            del self._queue[: self._head]
            self._base += self._head
            self._head = 0

    def _consume_marks(self, start: int, stop: int) -> None:
        """Positions ``start`` … ``stop - 1`` were consumed: count the marked ones."""
        marks = self._marks
        while marks and marks[0][0] < stop:
            mark = marks[0]
            if mark[1] <= stop:
                self.marked_popped += mark[1] - max(mark[0], start)
                marks.popleft()
            else:
                self.marked_popped += stop - max(mark[0], start)
                mark[0] = stop
                break

    def pop(self) -> BlockId:
        return self.pop_many(1)[0]

    def push(self, block_id: BlockId) -> None:
        self._queue.append(block_id)
        self._len += 1

    def pop_many(self, n: int) -> list[BlockId]:
        queue, head = self._queue, self._head
        blocks = queue[head : head + n]
        self._head = head + n
        if (self._stale or self._dead) and (self._stale or DEAD in blocks):
            blocks = self._skip_dead(blocks, n)  # some popped entries are dead: skip them
        elif len(blocks) != n:
            raise IndexError("pop from an empty free queue")
        self._len -= n
        marks = self._marks
        if marks:
            start, stop = self._base + head, self._base + self._head
            mark = marks[0]
            if mark[0] <= start and stop < mark[1]:  # inside the oldest mark (the common case)
                self.marked_popped += stop - start
                mark[0] = stop
            else:
                self._consume_marks(start, stop)
        if self._head > 4096:
            self._compact()
        return blocks

    def _skip_dead(self, chunk: list[BlockId], n: int) -> list[BlockId]:
        """:meth:`pop_many`'s live blocks when ``chunk`` (the entries it took) holds dead
        ones: drop those and take more entries until ``n`` are live."""
        queue, stale, blocks = self._queue, self._stale, []
        while True:
            for block_id in chunk:
                if block_id == DEAD:
                    self._dead -= 1
                    continue
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

    def push_many(self, block_ids: Sequence[BlockId], marked: int = 0) -> list[int] | None:
        """Push ``block_ids`` in order; the last ``marked`` of them are marked. Returns the
        mark (for :meth:`unmark`)."""
        end = self._base + len(self._queue) + len(block_ids)
        self._queue.extend(block_ids)
        self._len += len(block_ids)
        if not marked:
            return None
        mark = [end - marked, end]
        self._marks.append(mark)
        return mark

    def unmark(self, mark: list[int]) -> None:
        """Forget a mark whose queued entries were all taken back (revived), not popped."""
        for i, other in enumerate(self._marks):
            if other is mark:
                del self._marks[i]
                return

    def remove(self, block_id: BlockId) -> None:
        self._stale[block_id] = self._stale.get(block_id, 0) + 1
        self._len -= 1

    def remove_many(self, block_ids: Sequence[BlockId]) -> None:
        for block_id in block_ids:
            self.remove(block_id)

    def remove_range(self, start: int, stop: int, block_ids: Sequence[BlockId]) -> None:
        """Take back the blocks queued at absolute positions ``start`` … ``stop - 1``, which
        must be ``block_ids`` in queue order, all live and not yet reached by the head."""
        i, j = start - self._base, stop - self._base
        if i < self._head or self._queue[i:j] != list(block_ids):
            raise AssertionError(f"positions {start}..{stop - 1} do not hold the given blocks")
        self._queue[i:j] = [DEAD] * (j - i)
        self._dead += j - i
        self._len -= j - i

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[BlockId]:
        stale = dict(self._stale)
        for block_id in self._queue[self._head :]:
            if block_id == DEAD:
                continue
            dead = stale.get(block_id)
            if dead:
                stale[block_id] = dead - 1
            else:
                yield block_id


def make_free_queue(
    block_ids: Iterable[int], reuse: ReuseOrder | str = ReuseOrder.FIFO
) -> FreeQueue:
    """The fastest free queue for ``reuse``: :class:`FifoFreeQueue` or (LIFO)
    :class:`OrderedFreeQueue`."""
    if ReuseOrder(reuse) is ReuseOrder.FIFO:
        return FifoFreeQueue(block_ids)
    return OrderedFreeQueue(block_ids, reuse)
