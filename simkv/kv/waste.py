"""Where the KV memory went: a five-way split of a pool's token slots.

Every slot of a KV pool (one slot holds the K and V of one token in every layer) falls in exactly
one category at any instant, so the five counts always sum to the pool's capacity:

* **token states** (``token_slots``): slots holding KV that has actually been written (prompt and
  generated tokens of resident requests).
* **reservation** (``reserved_slots``): slots held by a request for its *future* tokens that it
  will use before finishing; per request at most ``final length - current length``.
* **internal fragmentation** (``internal_frag_slots``): slots held by a request that it will never
  use because they lie beyond its final length: over-reservation (max-length, power-of-two),
  buddy rounding of a contiguous chunk, the unused tail of a paged request's last block.
* **external fragmentation** (``external_frag_slots``): free slots that cannot serve the next
  request. Contiguous: free slots in chunks smaller than ``demand_slots``, the reservation of the
  pending (head-of-queue) request; zero when nothing is pending. Paged: always zero, since any
  free block can serve any request.
* **free** (``free_slots``): all other free slots.

Everything here is pure arithmetic on allocator state: no SimPy, no time. Time averages are sums
of breakdowns (``+``) divided by the number of samples (see :meth:`WasteBreakdown.fractions`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

CATEGORIES: tuple[str, ...] = (
    "token_states",
    "reservation",
    "internal_frag",
    "external_frag",
    "free",
)
"""Keys of :meth:`WasteBreakdown.fractions`, in field order (the report's stacking order)."""

CATEGORY_LABELS: tuple[str, ...] = (
    "token states",
    "reservation",
    "internal fragmentation",
    "external fragmentation",
    "free",
)
"""Human-readable legend entries, aligned with :data:`CATEGORIES`."""


@dataclass(frozen=True, slots=True)
class WasteBreakdown:
    """Slot counts of the five categories (module docstring); all ints, all ≥ 0.

    A single snapshot sums to the pool's capacity. A sum of snapshots (``a + b``) counts
    slot-iterations and sums to capacity × samples; its :meth:`fractions` are the time averages.
    """

    token_slots: int
    reserved_slots: int
    internal_frag_slots: int
    external_frag_slots: int
    free_slots: int

    def __post_init__(self) -> None:
        for name, value in zip(CATEGORIES, self.values(), strict=True):
            if value < 0:
                raise ValueError(f"{name} slots must be >= 0, got {value}")

    def values(self) -> tuple[int, int, int, int, int]:
        """The five counts in :data:`CATEGORIES` order."""
        return (
            self.token_slots,
            self.reserved_slots,
            self.internal_frag_slots,
            self.external_frag_slots,
            self.free_slots,
        )

    @classmethod
    def zero(cls) -> WasteBreakdown:
        """The neutral element of ``+`` (start value for sums)."""
        return cls(0, 0, 0, 0, 0)

    @property
    def total_slots(self) -> int:
        """Sum of the five categories (the pool capacity for a snapshot)."""
        return sum(self.values())

    def fractions(self) -> dict[str, float]:
        """Each category as a fraction of :attr:`total_slots`, keyed by :data:`CATEGORIES`.

        Raises ``ValueError`` for an empty breakdown (no slots: fractions are undefined).
        """
        total = self.total_slots
        if total == 0:
            raise ValueError("fractions of an empty breakdown are undefined")
        return {name: value / total for name, value in zip(CATEGORIES, self.values(), strict=True)}

    def to_bytes(self, bytes_per_slot: int) -> dict[str, int]:
        """Each category in bytes (``slots × bytes_per_slot``), keyed by :data:`CATEGORIES`."""
        if bytes_per_slot <= 0:
            raise ValueError(f"bytes_per_slot must be > 0, got {bytes_per_slot}")
        return {
            name: value * bytes_per_slot
            for name, value in zip(CATEGORIES, self.values(), strict=True)
        }

    def __add__(self, other: WasteBreakdown) -> WasteBreakdown:
        if not isinstance(other, WasteBreakdown):
            return NotImplemented
        return WasteBreakdown(*(a + b for a, b in zip(self.values(), other.values(), strict=True)))


def paged_breakdown(
    lengths: npt.ArrayLike,
    final_lengths: npt.ArrayLike,
    blocks_held: npt.ArrayLike,
    *,
    block_size: int,
    total_blocks: int,
) -> WasteBreakdown:
    """Breakdown of a paged pool of ``total_blocks × block_size`` slots.

    One array element per resident sequence: ``lengths`` tokens written so far, ``final_lengths``
    tokens it will hold when it finishes, ``blocks_held`` blocks in its table. Blocks are assumed
    unshared (no prefix caching or forks). Per sequence, with ``held = blocks × block_size``:
    reservation = ``min(held, final) - length``, internal = ``held - max(min(held, final),
    length)``. External fragmentation is 0. Raises ``ValueError`` if a sequence holds fewer slots
    than it has written, has written more than its final length, or the pool is over-committed.
    """
    length = np.asarray(lengths, dtype=np.int64)
    final = np.asarray(final_lengths, dtype=np.int64)
    held = np.asarray(blocks_held, dtype=np.int64) * block_size
    if not length.shape == final.shape == held.shape:
        raise ValueError("lengths, final_lengths and blocks_held must have the same shape")
    if np.any(length < 0) or np.any(length > held) or np.any(length > final):
        raise ValueError("each sequence needs 0 <= length <= min(final length, held slots)")
    used_later = np.minimum(held, final)
    free_blocks = total_blocks - int(held.sum()) // block_size
    if free_blocks < 0:
        raise ValueError(f"sequences hold more than the pool's {total_blocks} blocks")
    token = int(length.sum())
    reserved = int((used_later - length).sum())
    return WasteBreakdown(
        token_slots=token,
        reserved_slots=reserved,
        internal_frag_slots=int(held.sum()) - token - reserved,
        external_frag_slots=0,
        free_slots=free_blocks * block_size,
    )


def unwritten_slots(num_blocks: int, block_size: int, final_kv_tokens: int) -> int:
    """Slots of ``num_blocks`` blocks past a request's final length: never written (the
    internal fragmentation the request will leave in them)."""
    return max(0, num_blocks * block_size - final_kv_tokens)
