"""The KV core's errors. ``InvariantViolation`` is the one way anything in ``kv/`` (and the paged
memory built on it) reports a broken invariant: raised, never a bare ``assert`` (which vanishes
under ``python -O``).
"""

from __future__ import annotations


class OutOfBlocks(RuntimeError):
    """The pool cannot supply ``requested`` blocks; only ``free`` are free. Nothing was changed.

    Derives from ``RuntimeError`` so code written against the seed notebook still catches it.
    """

    def __init__(self, requested: int, free: int) -> None:
        # Both values go to ``args`` so the exception survives pickling (process-pool sweeps).
        super().__init__(requested, free)
        self.requested = requested
        self.free = free

    def __str__(self) -> str:
        return f"out of blocks: requested {self.requested}, {self.free} free"


class BlockError(ValueError):
    """A block id was used in a way the allocator's state does not allow."""


class InvalidBlockId(BlockError):
    """The id is outside ``[0, num_blocks)``, or names a free block where a used one is needed."""


class DoubleFree(BlockError):
    """``free`` was called on a block whose refcount is already zero."""


class InvariantViolation(AssertionError):
    """A KV component found its state inconsistent: ``BlockAllocator.check`` (the allocator or
    its tables), ``PagedKV.check`` (its running sums), a prefix cache asked to do what its
    invariants rule out. Derives from ``AssertionError`` so test code catching that still does."""
