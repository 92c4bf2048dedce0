"""The deque-based FIFO free queue behaves exactly like the OrderedDict one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.kv.allocator import FifoFreeQueue, OrderedFreeQueue, make_free_queue

N = 12
# an operation: ("pop", count) | ("push", block) | ("remove", block)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("pop"), st.integers(1, 4)),
        st.tuples(st.just("push"), st.integers(0, N - 1)),
        st.tuples(st.just("remove"), st.integers(0, N - 1)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(ops=ops, start=st.integers(0, N))
def test_fifo_queue_matches_the_ordered_queue(ops: list[tuple[str, int]], start: int) -> None:
    fast, ref = FifoFreeQueue(range(start)), OrderedFreeQueue(range(start))
    queued = set(range(start))
    for op, arg in ops:
        if op == "pop":
            n = min(arg, len(queued))
            got = fast.pop_many(n) if n > 1 else [fast.pop()] if n else []
            want = [ref.pop() for _ in range(n)]
            assert got == want
            queued -= set(want)
        elif op == "push" and arg not in queued:  # only free blocks are pushed
            fast.push_many([arg]) if arg % 2 else fast.push(arg)
            ref.push(arg)
            queued.add(arg)
        elif op == "remove" and arg in queued:  # only queued blocks are revived
            fast.remove(arg)
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
