"""Real K/V tensors behind the block tables, and a reference paged-attention kernel.

The rest of ``simkv.kv`` only does bookkeeping (which block holds which token). This module gives
that bookkeeping a physical backing store in numpy, so tests can check that the block tables,
forks and copy-on-write actually keep every sequence's K/V values intact.

Copy contract: a ``SequenceTable`` only *records* the block copies that a fork or a
copy-on-write needs (``table.pending_copies``); the store performs them in ``apply_copies``. Call
``apply_copies(table)`` on a freshly forked child, and on every table whose ``append`` /
``append_tokens`` was called outside this store, before any K/V is written into the step and
before the table is read. ``TensorKVStore.append`` / ``append_many`` do it themselves for the
table they write, and every read (``gather``, ``paged_attention``) raises ``UnappliedCopies``
rather than return values from a block whose copy has not happened yet.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from simkv.kv.allocator import BlockAllocator
from simkv.kv.block_table import SequenceTable

FloatArray = npt.NDArray[np.floating]


class UnappliedCopies(RuntimeError):
    """A table was read while its ``pending_copies`` were not yet applied to the store."""


class EmptySequence(ValueError):
    """Attention was asked over a sequence with no tokens (the softmax is undefined)."""


class TensorKVStore:
    """K and V arrays of shape ``(num_blocks, block_size, num_heads, head_dim)``.

    Invariants:

    * for every table ``t`` used with this store and every position ``p < t.length`` whose write
      happened through the store (and whose table has no pending copies), ``k[t.translate(p)]`` /
      ``v[t.translate(p)]`` hold the values appended at ``p``;
    * slots beyond a table's ``length`` hold whatever the block last contained (blocks are not
      zeroed on free); readers mask them out by ``length``, never by content.

    The block ids are the allocator's; the store must be built with that allocator's
    ``num_blocks`` and ``block_size``. It never changes refcounts.
    """

    __slots__ = ("k", "v")

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        num_heads: int,
        head_dim: int,
        dtype: npt.DTypeLike = np.float32,
    ) -> None:
        for name, value in (
            ("num_blocks", num_blocks),
            ("block_size", block_size),
            ("num_heads", num_heads),
            ("head_dim", head_dim),
        ):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        shape = (num_blocks, block_size, num_heads, head_dim)
        self.k: FloatArray = np.zeros(shape, dtype=dtype)
        self.v: FloatArray = np.zeros(shape, dtype=dtype)

    @property
    def num_blocks(self) -> int:
        """Physical blocks in the store."""
        return self.k.shape[0]

    @property
    def block_size(self) -> int:
        """Token slots per block."""
        return self.k.shape[1]

    @property
    def num_heads(self) -> int:
        """KV heads per token."""
        return self.k.shape[2]

    @property
    def head_dim(self) -> int:
        """Elements per head."""
        return self.k.shape[3]

    # -- writes -----------------------------------------------------------------------------
    def apply_copies(self, table: SequenceTable) -> None:
        """Drain ``table.pending_copies`` and copy each block's K and V from ``src`` to ``dst``.

        Copies run oldest first, so a chain (A→B then B→C) ends with A's contents in C.
        """
        self._check_table(table)
        for op in table.drain_copies():
            self.k[op.dst] = self.k[op.src]
            self.v[op.dst] = self.v[op.src]

    def append(
        self, table: SequenceTable, allocator: BlockAllocator, k: FloatArray, v: FloatArray
    ) -> None:
        """Append one token: grow ``table`` by one, apply its copies, write ``k``/``v`` there.

        ``k`` and ``v`` have shape ``(num_heads, head_dim)``. On ``OutOfBlocks`` nothing changes.
        """
        self._check_token_shape(k, v, leading=())
        self._check_table(table)
        table.append(allocator)
        self.apply_copies(table)
        block_id, offset = table.translate(table.length - 1)
        self.k[block_id, offset] = k
        self.v[block_id, offset] = v

    def append_many(
        self, table: SequenceTable, allocator: BlockAllocator, k: FloatArray, v: FloatArray
    ) -> None:
        """Append ``n`` tokens at once (e.g. a prefill chunk), written with one scatter each.

        ``k`` and ``v`` have shape ``(n, num_heads, head_dim)``; ``n == 0`` is a no-op. Atomic on
        ``OutOfBlocks`` (``append_tokens`` is), in which case nothing is written.
        """
        if k.ndim != 3:
            raise ValueError(f"k must have shape (n, num_heads, head_dim), got {k.shape}")
        n_tokens = k.shape[0]
        self._check_token_shape(k, v, leading=(n_tokens,))
        self._check_table(table)
        start = table.length
        table.append_tokens(allocator, n_tokens)
        self.apply_copies(table)
        block_ids, offsets = self._slots(table, start, table.length)
        self.k[block_ids, offsets] = k
        self.v[block_ids, offsets] = v

    # -- reads ------------------------------------------------------------------------------
    def gather(self, table: SequenceTable) -> tuple[FloatArray, FloatArray]:
        """Dense copies of the table's K and V, each ``(length, num_heads, head_dim)``."""
        self._check_readable(table)
        block_ids, offsets = self._slots(table, 0, table.length)
        return self.k[block_ids, offsets], self.v[block_ids, offsets]

    def block_view(self, table: SequenceTable, index: int) -> tuple[FloatArray, FloatArray]:
        """Read-only views of the valid slots of the table's ``index``-th block.

        Shape ``(valid, num_heads, head_dim)`` with ``valid = min(block_size, length - start)``;
        stale slots past ``length`` are never exposed.
        """
        self._check_readable(table)
        start = index * self.block_size
        if not 0 <= start < table.length:
            raise IndexError(f"block index {index} out of range [0, {table.num_blocks})")
        valid = min(self.block_size, table.length - start)
        block_id = table.block_ids[index]
        k_view = self.k[block_id, :valid].view()
        v_view = self.v[block_id, :valid].view()
        k_view.flags.writeable = False
        v_view.flags.writeable = False
        return k_view, v_view

    # -- helpers ----------------------------------------------------------------------------
    def _slots(
        self, table: SequenceTable, start: int, stop: int
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """Physical ``(block_ids, offsets)`` of logical positions ``[start, stop)``."""
        positions = np.arange(start, stop)
        ids = np.asarray(table.block_ids, dtype=np.intp)
        return ids[positions // self.block_size], positions % self.block_size

    def _check_table(self, table: SequenceTable) -> None:
        if table.block_size != self.block_size:
            raise ValueError(
                f"table block_size {table.block_size} != store block_size {self.block_size}"
            )

    def _check_readable(self, table: SequenceTable) -> None:
        self._check_table(table)
        if table.pending_copies:
            raise UnappliedCopies(
                f"{len(table.pending_copies)} pending copies; call apply_copies(table) first"
            )

    def _check_token_shape(self, k: FloatArray, v: FloatArray, leading: tuple[int, ...]) -> None:
        expected = (*leading, self.num_heads, self.head_dim)
        if k.shape != expected or v.shape != expected:
            raise ValueError(f"k and v must have shape {expected}, got {k.shape} and {v.shape}")


def _scale(head_dim: int, scale: float | None) -> float:
    return 1.0 / float(np.sqrt(head_dim)) if scale is None else scale


def dense_attention(
    q: FloatArray, k: FloatArray, v: FloatArray, scale: float | None = None
) -> FloatArray:
    """Plain single-query attention: ``softmax(q·Kᵀ·scale)·V`` per head.

    ``q`` is ``(num_heads, head_dim)``; ``k`` and ``v`` are ``(length, num_heads, head_dim)``
    with ``length >= 1``. Returns ``(num_heads, head_dim)``. ``scale`` defaults to
    ``1/sqrt(head_dim)``.
    """
    if k.shape[0] == 0:
        raise EmptySequence("attention over an empty sequence")
    scores = np.einsum("hd,thd->ht", q, k) * _scale(q.shape[-1], scale)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    return np.einsum("ht,thd->hd", weights, v)


def paged_attention(
    q: FloatArray, store: TensorKVStore, table: SequenceTable, scale: float | None = None
) -> FloatArray:
    """Single-query attention read block by block through ``table``, never densified.

    Keeps a running maximum ``m``, normaliser ``l`` and unnormalised output ``acc`` per head;
    each block rescales them by ``exp(m_old - m_new)`` (online softmax), so only one block's
    scores are alive at a time. Stale slots of the trailing partial block are excluded by length.
    Equal to ``dense_attention(q, *store.gather(table), scale)`` up to rounding. Accumulates in
    at least float32.
    """
    if q.shape != (store.num_heads, store.head_dim):
        raise ValueError(f"q must have shape {(store.num_heads, store.head_dim)}, got {q.shape}")
    if table.length == 0:
        raise EmptySequence("attention over an empty sequence")
    acc_dtype = np.promote_types(np.promote_types(q.dtype, store.k.dtype), np.float32)
    num_heads, head_dim = q.shape
    running_max = np.full(num_heads, -np.inf, dtype=acc_dtype)
    normaliser = np.zeros(num_heads, dtype=acc_dtype)
    acc = np.zeros((num_heads, head_dim), dtype=acc_dtype)
    q_scaled = q.astype(acc_dtype) * _scale(head_dim, scale)
    for index in range(table.num_blocks):
        k_block, v_block = store.block_view(table, index)
        scores = np.einsum("hd,thd->ht", q_scaled, k_block)
        new_max = np.maximum(running_max, scores.max(axis=1))
        rescale = np.exp(running_max - new_max)  # exp(-inf) = 0 on the first block
        probs = np.exp(scores - new_max[:, None])
        normaliser = normaliser * rescale + probs.sum(axis=1)
        acc = acc * rescale[:, None] + np.einsum("ht,thd->hd", probs, v_block)
        running_max = new_max
    return acc / normaliser[:, None]
