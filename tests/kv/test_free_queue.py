"""The list-based FIFO and LIFO free queues behave exactly like the OrderedDict one, and the
FIFO queue's absolute positions say which pushed entries the head has passed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.kv.free_queue import FifoFreeQueue, LifoFreeQueue, OrderedFreeQueue, make_free_queue

N = 12
# an operation: ("pop", count) | ("push", block) | ("remove", block) | ("batch", count)
# (push_many of up to count free blocks) | ("revive", count) (remove_many of the last count
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
    position: dict[int, int] = dict(zip(range(start), range(start), strict=True))  # live entry
    batch: tuple[int, list[int]] = (0, [])  # the last push_many: first position, blocks
    for op, arg in ops:
        if op == "batch":
            blocks = [b for b in range(N) if b not in queued][:arg]
            start_at = fast.end_position
            fast.push_many(blocks)
            assert fast.end_position == start_at + len(blocks)
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
                fast.remove_many(tail)
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
            for b in want:  # the head passed exactly the popped entries' positions
                assert position.pop(b) < fast.head_position
        elif op == "push" and arg not in queued:  # only free blocks are pushed
            if arg % 2:
                fast.push(arg)
            else:
                fast.push_many([arg])
            ref.push(arg)
            queued.add(arg)
            position[arg] = fast.end_position - 1
        elif op == "remove" and arg in queued:  # only queued blocks are revived
            fast.remove(arg)
            ref.remove(arg)
            queued.discard(arg)
            position.pop(arg, None)
        assert len(fast) == len(ref) == len(queued)
        assert list(fast) == list(ref)
        assert all(fast.head_position <= p < fast.end_position for p in position.values())


@settings(max_examples=300, deadline=None)
@given(ops=ops, start=st.integers(0, N))
def test_lifo_queue_matches_the_ordered_queue(ops: list[tuple[str, int]], start: int) -> None:
    fast, ref = LifoFreeQueue(range(start)), OrderedFreeQueue(range(start), "lifo")
    queued = set(range(start))
    for op, arg in ops:
        if op == "batch":
            blocks = [b for b in range(N) if b not in queued][:arg]
            fast.push_many(blocks)
            ref.push_many(blocks)
            queued |= set(blocks)
        elif op in ("pop", "revive"):  # (revive: a bulk pop of up to arg, 0 included)
            n = min(arg, len(queued)) if op == "pop" else min(arg - 1, len(queued))
            got = fast.pop_many(n) if n != 1 else [fast.pop()]
            want = [ref.pop() for _ in range(n)]
            assert got == want
            queued -= set(want)
        elif op == "push" and arg not in queued:
            fast.push(arg)
            ref.push(arg)
            queued.add(arg)
        elif op == "remove" and arg in queued:
            fast.remove_many([arg]) if arg % 2 else fast.remove(arg)
            ref.remove(arg)
            queued.discard(arg)
        assert len(fast) == len(ref) == len(queued)
        assert list(fast) == list(ref)


def test_factory_picks_by_reuse_order() -> None:
    assert isinstance(make_free_queue(range(3)), FifoFreeQueue)
    lifo = make_free_queue(range(3), "lifo")
    assert isinstance(lifo, OrderedFreeQueue)
    lifo.push_many([])
    assert lifo.pop() == 0
    stack = make_free_queue(range(3), "lifo", removals=False)
    assert isinstance(stack, LifoFreeQueue)
    assert stack.pop_many(2) == [0, 1]


def test_positions_survive_compaction() -> None:
    """Long runs compact the list; positions stay absolute and pops stay in order."""
    queue = FifoFreeQueue(range(8))
    for block in range(8, 20_008):
        queue.push_many([block])
        if block % 7 == 0:  # some blocks are taken back before the head reaches them
            queue.remove(block)
        if len(queue) >= 4:
            head = queue.head_position
            popped = queue.pop_many(2) if block % 2 else [queue.pop()]
            assert queue.head_position >= head + len(popped)
    assert queue.head_position > 4096 and queue._base > 0  # compacted at least once
    assert queue.end_position == 20_008
    assert list(queue) == [b for b in range(19_990, 20_008) if b % 7][-len(queue) :]


def test_a_split_queue_reuses_freed_blocks_without_content_first() -> None:
    """vLLM 0.32 ``BlockPool.free_blocks``: blocks without a hash are prepended in the order
    freed, cached ones appended. Blocks 0, 1, 2 are one request's (0 and 1 cached), freed tail
    first: 2 goes to the head, 1 and 0 to the tail; under FIFO all three go to the tail."""
    from simkv.kv.hash_cache import HashPrefixCache

    orders = {}
    for reuse in ("split", "fifo"):
        cache = HashPrefixCache(5, reuse)
        blocks = cache.pop_many(3)
        cache.insert(100, blocks[0])
        cache.insert(101, blocks[1])
        cache.push_many(blocks[::-1])
        orders[reuse] = cache.pop_many(5)
    assert orders == {"split": [2, 3, 4, 1, 0], "fifo": [3, 4, 2, 1, 0]}


def test_under_split_reuse_a_key_held_by_two_blocks_survives_the_first_ones_eviction() -> None:
    """vLLM's ``BlockHashToBlockMap`` keeps every block cached under one hash (a recomputed
    prefix fills a second block with the same content); ``get_one_block`` returns the first
    still cached. Blocks 0 and 1 both hold key 7; evicting 0 leaves 7 found in 1, and a freed
    block holding a shared key goes to the tail like any cached block."""
    from simkv.kv.hash_cache import HashPrefixCache

    cache = HashPrefixCache(4, "split")
    first, second, other = cache.pop_many(3)
    assert cache.insert(7, first) and not cache.insert(7, second)
    cache.insert(8, other)
    assert cache.lookup([7]) == [first] and cache.cached_blocks == 3
    cache.push_many([first, second, other])  # all cached: to the tail, in order
    assert cache.pop_many(2) == [3, first]  # block 3 (never used), then 7's first block
    assert cache.lookup([7]) == [second]  # the copy takes its place
    assert cache.pop_many(1) == [second]
    assert cache.lookup([7]) == [] and cache.lookup([8]) == [other]
    assert cache.cached_blocks == 1 and cache.evictions == 2
