"""TensorKVStore: real K/V behind block tables; paged attention equals dense attention."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simkv.kv.allocator import BlockAllocator, OutOfBlocks
from simkv.kv.block_table import CopyOp, SequenceTable, fork_sequence
from simkv.kv.tensor_store import (
    EmptySequence,
    TensorKVStore,
    UnappliedCopies,
    dense_attention,
    paged_attention,
)

BLOCK = 4
HEADS = 2
DIM = 8
BLOCKS = 16


def _tokens(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    shape = (n, HEADS, DIM)
    return rng.standard_normal(shape), rng.standard_normal(shape)


def _setup(num_blocks: int = BLOCKS, dtype: type = np.float64):
    # float64 so paged vs dense differ only by summation order, well inside rtol 1e-5 even for
    # outputs near zero; test_default_float32_store covers the float32 default.
    alloc = BlockAllocator(num_blocks, BLOCK)
    return alloc, TensorKVStore(num_blocks, BLOCK, HEADS, DIM, dtype=dtype)


def _append_all(store, table, alloc, k, v) -> None:
    for kt, vt in zip(k, v, strict=True):
        store.append(table, alloc, kt, vt)


def _assert_attention_matches(store, table, k, v, rng) -> None:
    q = rng.standard_normal((HEADS, DIM))
    np.testing.assert_allclose(
        paged_attention(q, store, table), dense_attention(q, k, v), rtol=1e-5
    )


# -- reference attention, hand-computed ------------------------------------------------------
def test_dense_attention_hand_computed() -> None:
    q = np.array([[1.0, 0.0]])
    k = np.array([[[1.0, 0.0]], [[0.0, 0.0]]])
    v = np.array([[[2.0, 0.0]], [[0.0, 4.0]]])
    e = math.e
    # scores (1, 0) → weights (e, 1)/(e + 1)
    expected = [[2 * e / (e + 1), 4 / (e + 1)]]
    np.testing.assert_allclose(dense_attention(q, k, v, scale=1.0), expected, rtol=1e-12)
    # default scale 1/sqrt(2): scores (1/sqrt2, 0)
    w = math.exp(1 / math.sqrt(2))
    expected_default = [[2 * w / (w + 1), 4 / (w + 1)]]
    np.testing.assert_allclose(dense_attention(q, k, v), expected_default, rtol=1e-12)


def test_paged_attention_hand_computed_spans_two_blocks() -> None:
    alloc = BlockAllocator(4, block_size=2)
    store = TensorKVStore(4, 2, 1, 2, dtype=np.float64)
    table = SequenceTable(2)
    # keys equal → uniform weights → mean of the three values
    keys = np.ones((3, 1, 2))
    values = np.array([[[3.0, 0.0]], [[0.0, 6.0]], [[3.0, 3.0]]])
    store.append_many(table, alloc, keys, values)
    out = paged_attention(np.array([[5.0, -1.0]]), store, table)
    np.testing.assert_allclose(out, [[2.0, 3.0]], rtol=1e-12)


@pytest.mark.parametrize("length", [1, BLOCK - 1, BLOCK, 3 * BLOCK + 2, 5 * BLOCK])
def test_paged_equals_dense(length: int) -> None:
    rng = np.random.default_rng(length)
    alloc, store = _setup()
    table = SequenceTable(BLOCK)
    k, v = _tokens(rng, length)
    _append_all(store, table, alloc, k, v)
    _assert_attention_matches(store, table, k, v, rng)
    q = rng.standard_normal((HEADS, DIM))
    np.testing.assert_allclose(
        paged_attention(q, store, table, scale=0.9),
        dense_attention(q, k, v, scale=0.9),
        rtol=1e-5,
    )


def test_paged_attention_survives_large_scores() -> None:
    # Scores ~1e3 overflow exp() without the running max; the online softmax must not.
    alloc, store = _setup()
    table = SequenceTable(BLOCK)
    rng = np.random.default_rng(7)
    k, v = _tokens(rng, 3 * BLOCK)
    k *= 100.0
    _append_all(store, table, alloc, k, v)
    q = 100.0 * rng.standard_normal((HEADS, DIM))
    out = paged_attention(q, store, table, scale=1.0)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, dense_attention(q, k, v, scale=1.0), rtol=1e-5, atol=1e-6)


def test_default_float32_store() -> None:
    rng = np.random.default_rng(8)
    alloc = BlockAllocator(BLOCKS, BLOCK)
    store = TensorKVStore(BLOCKS, BLOCK, HEADS, DIM)
    assert store.k.dtype == store.v.dtype == np.float32
    table = SequenceTable(BLOCK)
    k, v = (x.astype(np.float32) for x in _tokens(rng, 3 * BLOCK + 1))
    store.append_many(table, alloc, k, v)
    q = rng.standard_normal((HEADS, DIM)).astype(np.float32)
    out = paged_attention(q, store, table)
    assert out.dtype == np.float32
    # float32 rounding differs between the two summation orders; atol covers outputs near 0
    np.testing.assert_allclose(out, dense_attention(q, k, v), rtol=1e-5, atol=1e-6)


# -- writes and gather -----------------------------------------------------------------------
def test_gather_equals_appended_and_slots_are_physical() -> None:
    rng = np.random.default_rng(1)
    alloc, store = _setup()
    other = SequenceTable(BLOCK)  # interleaved so the table's blocks are not 0, 1, 2
    table = SequenceTable(BLOCK)
    k, v = _tokens(rng, 9)
    for i in range(9):
        store.append(table, alloc, k[i], v[i])
        if i % BLOCK == 0:
            store.append_many(other, alloc, k[:BLOCK], v[:BLOCK])
    assert table.block_ids == [0, 2, 4]
    got_k, got_v = store.gather(table)
    np.testing.assert_array_equal(got_k, k)
    np.testing.assert_array_equal(got_v, v)
    # token 6 lives at block_ids[1] = 2, offset 2
    np.testing.assert_array_equal(store.k[2, 2], k[6])
    alloc.check([table, other])


def test_append_many_matches_one_by_one() -> None:
    rng = np.random.default_rng(2)
    k, v = _tokens(rng, 11)
    alloc_a, store_a = _setup()
    alloc_b, store_b = _setup()
    a, b = SequenceTable(BLOCK), SequenceTable(BLOCK)
    _append_all(store_a, a, alloc_a, k, v)
    store_b.append_many(b, alloc_b, k[:3], v[:3])  # partial prefill, then a chunk across blocks
    store_b.append_many(b, alloc_b, k[3:3], v[3:3])  # n == 0 is a no-op
    store_b.append_many(b, alloc_b, k[3:], v[3:])
    assert a.block_ids == b.block_ids == [0, 1, 2]
    np.testing.assert_array_equal(store_a.k, store_b.k)
    np.testing.assert_array_equal(store_a.v, store_b.v)


def test_append_many_out_of_blocks_writes_nothing() -> None:
    rng = np.random.default_rng(3)
    alloc, store = _setup(num_blocks=2)
    table = SequenceTable(BLOCK)
    k, v = _tokens(rng, 2 * BLOCK + 1)
    with pytest.raises(OutOfBlocks):
        store.append_many(table, alloc, k, v)
    assert table.length == 0
    assert not store.k.any()
    assert not store.v.any()


def test_apply_copies_runs_oldest_first() -> None:
    _, store = _setup()
    store.k[0] = 1.0
    store.k[1] = 2.0
    table = SequenceTable(BLOCK, pending_copies=[CopyOp(0, 1), CopyOp(1, 2)])
    store.apply_copies(table)
    assert table.pending_copies == []
    assert np.all(store.k[2] == 1.0)  # would be 2.0 if the chain ran newest first


# -- forks and copy-on-write -----------------------------------------------------------------
def test_eager_fork_then_appends_on_both_sides() -> None:
    rng = np.random.default_rng(4)
    alloc, store = _setup()
    parent = SequenceTable(BLOCK)
    prefix_k, prefix_v = _tokens(rng, BLOCK + 2)
    store.append_many(parent, alloc, prefix_k, prefix_v)
    child = fork_sequence(parent, alloc, mode="eager")
    with pytest.raises(UnappliedCopies):
        store.gather(child)
    store.apply_copies(child)
    pk, pv = _tokens(rng, 3)
    ck, cv = _tokens(rng, 3)
    _append_all(store, parent, alloc, pk, pv)
    _append_all(store, child, alloc, ck, cv)
    alloc.check([parent, child])
    for table, own_k, own_v in ((parent, pk, pv), (child, ck, cv)):
        want_k = np.concatenate([prefix_k, own_k])
        want_v = np.concatenate([prefix_v, own_v])
        got_k, got_v = store.gather(table)
        np.testing.assert_array_equal(got_k, want_k)
        np.testing.assert_array_equal(got_v, want_v)
        _assert_attention_matches(store, table, want_k, want_v, rng)


def test_eager_fork_without_the_copy_loses_the_prefix() -> None:
    rng = np.random.default_rng(4)
    alloc, store = _setup()
    parent = SequenceTable(BLOCK)
    prefix_k, prefix_v = _tokens(rng, BLOCK + 2)
    store.append_many(parent, alloc, prefix_k, prefix_v)
    child = fork_sequence(parent, alloc, mode="eager")
    assert child.drain_copies() == [CopyOp(1, 2)]  # dropped, not applied
    got_k, _ = store.gather(child)
    np.testing.assert_array_equal(got_k[:BLOCK], prefix_k[:BLOCK])  # shared full block is fine
    assert not np.array_equal(got_k[BLOCK:], prefix_k[BLOCK:])
    q = rng.standard_normal((HEADS, DIM))
    paged = paged_attention(q, store, child)
    assert not np.allclose(paged, dense_attention(q, prefix_k, prefix_v), rtol=1e-5)


def _lazy_pair(rng: np.random.Generator):
    alloc, store = _setup()
    parent = SequenceTable(BLOCK)
    prefix_k, prefix_v = _tokens(rng, BLOCK + 2)
    store.append_many(parent, alloc, prefix_k, prefix_v)
    child = fork_sequence(parent, alloc, mode="lazy")
    assert child.block_ids == parent.block_ids == [0, 1]
    return alloc, store, parent, child, prefix_k, prefix_v


def test_lazy_fork_cow_keeps_both_sides_intact() -> None:
    rng = np.random.default_rng(5)
    alloc, store, parent, child, prefix_k, prefix_v = _lazy_pair(rng)
    pk, pv = _tokens(rng, 3)
    ck, cv = _tokens(rng, 3)
    _append_all(store, parent, alloc, pk, pv)  # first append copies shared block 1 into 2
    _append_all(store, child, alloc, ck, cv)  # block 1 is now the child's alone
    assert parent.block_ids == [0, 2, 3]
    assert child.block_ids == [0, 1, 4]
    alloc.check([parent, child])
    for table, own_k, own_v in ((parent, pk, pv), (child, ck, cv)):
        want_k = np.concatenate([prefix_k, own_k])
        want_v = np.concatenate([prefix_v, own_v])
        got_k, got_v = store.gather(table)
        np.testing.assert_array_equal(got_k, want_k)
        np.testing.assert_array_equal(got_v, want_v)
        _assert_attention_matches(store, table, want_k, want_v, rng)


def test_lazy_fork_without_the_copy_loses_the_prefix() -> None:
    rng = np.random.default_rng(5)
    alloc, store, parent, _child, prefix_k, prefix_v = _lazy_pair(rng)
    pk, pv = _tokens(rng, 1)
    parent.append(alloc)
    assert parent.drain_copies() == [CopyOp(1, 2)]  # dropped, not applied
    block_id, offset = parent.translate(parent.length - 1)
    store.k[block_id, offset] = pk[0]
    store.v[block_id, offset] = pv[0]
    want_k = np.concatenate([prefix_k, pk])
    want_v = np.concatenate([prefix_v, pv])
    got_k, _ = store.gather(parent)
    assert not np.array_equal(got_k, want_k)
    q = rng.standard_normal((HEADS, DIM))
    assert not np.allclose(paged_attention(q, store, parent), dense_attention(q, want_k, want_v))


# -- block reuse -----------------------------------------------------------------------------
def test_reused_blocks_do_not_leak_stale_values() -> None:
    rng = np.random.default_rng(6)
    alloc, store = _setup(num_blocks=3)
    old = SequenceTable(BLOCK)
    old_k, old_v = _tokens(rng, 2 * BLOCK - 1)
    store.append_many(old, alloc, 50.0 + old_k, 50.0 + old_v)
    child = fork_sequence(old, alloc, mode="eager")
    store.apply_copies(child)
    old.free(alloc)
    child.free(alloc)
    alloc.check([])
    new = SequenceTable(BLOCK)
    new_k, new_v = _tokens(rng, BLOCK + 1)
    store.append_many(new, alloc, new_k, new_v)
    # FIFO: old's private block 1 was freed first, then shared block 0, then child's copy 2
    assert new.block_ids == [1, 0]
    # the stale slots of the new trailing block really hold the old sequence's tokens 1..3 …
    np.testing.assert_array_equal(store.k[0, 1:], 50.0 + old_k[1:BLOCK])
    # … yet the new sequence sees only its own tokens
    got_k, got_v = store.gather(new)
    np.testing.assert_array_equal(got_k, new_k)
    np.testing.assert_array_equal(got_v, new_v)
    _assert_attention_matches(store, new, new_k, new_v, rng)


# -- errors ----------------------------------------------------------------------------------
def test_errors() -> None:
    alloc, store = _setup()
    empty = SequenceTable(BLOCK)
    q = np.zeros((HEADS, DIM))
    with pytest.raises(EmptySequence):
        paged_attention(q, store, empty)
    with pytest.raises(EmptySequence):
        dense_attention(q, np.zeros((0, HEADS, DIM)), np.zeros((0, HEADS, DIM)))
    with pytest.raises(ValueError, match="shape"):
        store.append(empty, alloc, np.zeros((HEADS + 1, DIM)), np.zeros((HEADS + 1, DIM)))
    with pytest.raises(ValueError, match="shape"):
        paged_attention(np.zeros((HEADS, DIM + 1)), store, empty)
    with pytest.raises(ValueError, match="block_size"):
        store.gather(SequenceTable(BLOCK + 1))
    with pytest.raises(ValueError, match="num_heads must be >= 1"):
        TensorKVStore(4, BLOCK, 0, DIM)
    assert empty.length == 0
    assert alloc.free_blocks == BLOCKS
