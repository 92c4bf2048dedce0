"""The list-based FIFO free queue behaves exactly like the OrderedDict one, and counts the
marked entries it pops."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.kv.free_queue import FifoFreeQueue, OrderedFreeQueue, make_free_queue

N = 12
# an operation: ("pop", count) | ("push", block) | ("remove", block) | ("batch", count)
# (push_many of up to count free blocks) | ("revive", count) (remove_range of the last count
# entries of the last batch, when they are all still queued where the batch put them)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("pop"), st.integers(1, 4)),
        st.tuples(st.just("push"), st.integers(0, N - 1)),
        st.tuples(st.just("remove"), st.integers(0, N - 1)),
        st.tuples(st.just("batch"), st.integers(1, 5)),
        st.tuples(st.just("revive"), st.integers(1, 5)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(ops=ops, start=st.integers(0, N))
def test_fifo_queue_matches_the_ordered_queue(ops: list[tuple[str, int]], start: int) -> None:
    fast, ref = FifoFreeQueue(range(start)), OrderedFreeQueue(range(start))
    queued = set(range(start))
    marked: dict[int, list[int]] = {}  # queued blocks pushed marked → their mark
    marked_popped = 0
    position: dict[int, int] = {}  # queued block → where its live entry is
    batch: tuple[int, list[int]] = (0, [])  # the last push_many: first position, blocks
    for op, arg in ops:
        if op == "batch":
            blocks = [b for b in range(N) if b not in queued][:arg]
            start_at = fast.end_position
            fast.push_many(blocks)
            for k, b in enumerate(blocks):
                ref.push(b)
                position[b] = start_at + k
            queued |= set(blocks)
            batch = (start_at, blocks)
        elif op == "revive":
            start_at, blocks = batch
            tail = blocks[-arg:]
            first = start_at + len(blocks) - len(tail)
            if tail and all(position.get(b) == first + k for k, b in enumerate(tail)):
                fast.remove_range(first, first + len(tail), tail)
                for b in tail:
                    ref.remove(b)
                    queued.discard(b)
                    del position[b]
        elif op == "pop":
            n = min(arg, len(queued))
            got = fast.pop_many(n) if n > 1 else [fast.pop()] if n else []
            want = [ref.pop() for _ in range(n)]
            assert got == want
            queued -= set(want)
            for b in want:
                position.pop(b, None)
            marked_popped += sum(1 for b in want if marked.pop(b, None) is not None)
        elif op == "push" and arg not in queued:  # only free blocks are pushed
            if arg % 3 == 0:
                fast.push(arg)
            else:  # marked when arg % 3 == 2
                mark = fast.push_many([arg], marked=int(arg % 3 == 2))
                if mark is not None:
                    marked[arg] = mark
            ref.push(arg)
            queued.add(arg)
            position[arg] = fast.end_position - 1
        elif op == "remove" and arg in queued:  # only queued blocks are revived
            fast.remove(arg)
            ref.remove(arg)
            queued.discard(arg)
            position.pop(arg, None)
            if arg in marked:  # revived: it leaves the queue without being popped
                fast.unmark(marked.pop(arg))
        assert len(fast) == len(ref) == len(queued)
        assert list(fast) == list(ref)
        assert fast.marked_popped == marked_popped


def test_factory_picks_by_reuse_order() -> None:
    assert isinstance(make_free_queue(range(3)), FifoFreeQueue)
    lifo = make_free_queue(range(3), "lifo")
    assert isinstance(lifo, OrderedFreeQueue)
    lifo.push_many([])
    assert lifo.pop() == 0


def test_marks_survive_compaction() -> None:
    """Long runs compact the list (positions stay absolute): every marked pop is counted."""
    queue = FifoFreeQueue(range(8))
    expected, marked = 0, set()
    for block in range(8, 20_008):
        mark = queue.push_many([block], marked=int(block % 5 == 0))
        if mark is not None:
            marked.add(block)
            if block % 7 == 0:  # revive some marked blocks: not evictions
                queue.remove(block)
                queue.unmark(mark)
                marked.discard(block)
        if len(queue) < 4:
            continue
        popped = queue.pop_many(2) if block % 2 else [queue.pop()]
        expected += len(marked & set(popped))
        marked -= set(popped)
    assert queue.head_position > 4096 and queue._base > 0  # compacted at least once
    assert queue.marked_popped == expected > 3000


def test_remove_range_refuses_positions_that_do_not_hold_the_blocks() -> None:
    queue = FifoFreeQueue(range(4))
    queue.pop_many(1)
    for start, stop, blocks in [(0, 2, [0, 1]), (1, 3, [2, 1]), (2, 4, [2, 3, 4])]:
        try:
            queue.remove_range(start, stop, blocks)
        except AssertionError:
            continue
        raise AssertionError(f"remove_range({start}, {stop}, {blocks}) was accepted")
    queue.remove_range(2, 4, [2, 3])
    assert list(queue) == [1] and len(queue) == 1
    assert queue.pop_many(1) == [1]
