"""The running sums behind a paged memory's waste split, so a step's split costs O(1).

``written_tokens`` (Σ computed tokens of GPU-resident requests, each sequence of a forked group
counted) minus ``shared_tokens`` (tokens of full blocks shared by several requests, counted once
per extra reference: prefix-cache hits) minus ``fork_dup_tokens`` (tokens a forked group's
sequences share, counted once per extra reference) are the token states; ``internal_slots`` (Σ
over GPU-resident requests of slots in their blocks beyond their final length: slots that will
never be written) is internal fragmentation. Everything else held is reservation.

Only :class:`KVSums`'s methods change the sums; the memory and its parts
(:mod:`simkv.engine.memory`) call them when requests' blocks come and go.
"""

from __future__ import annotations

from simkv.kv.allocator import InvariantViolation


class KVSums:
    """The four running sums of one paged memory (module docstring), all ≥ 0 between calls.

    Invariant (checked by :meth:`check` against values recomputed from the resident
    requests): each sum equals its definition."""

    __slots__ = ("fork_dup_tokens", "internal_slots", "shared_tokens", "written_tokens")

    def __init__(self) -> None:
        self.written_tokens = 0
        self.internal_slots = 0
        self.shared_tokens = 0
        self.fork_dup_tokens = 0

    def computed(self, tokens: int) -> None:
        """``tokens`` more tokens of resident requests have their KV written."""
        self.written_tokens += tokens

    def grew(self, internal_slots: int) -> None:
        """New blocks of resident requests add ``internal_slots`` never-written slots."""
        self.internal_slots += internal_slots

    def shared(self, tokens: int) -> None:
        """``tokens`` more (fewer, when negative) tokens are held through extra references."""
        self.shared_tokens += tokens

    def resident(self, sign: int, written_tokens: int, internal_slots: int) -> None:
        """A single-sequence request's KV arrives on (``sign`` 1) or leaves (-1) the GPU."""
        self.written_tokens += sign * written_tokens
        self.internal_slots += sign * internal_slots

    def group(self, sign: int, written_tokens: int, internal_slots: int, dup_tokens: int) -> None:
        """A forked group's share (:func:`~simkv.engine.memory.forks.group_sums`) is added
        (``sign`` 1) or removed (-1)."""
        self.written_tokens += sign * written_tokens
        self.internal_slots += sign * internal_slots
        self.fork_dup_tokens += sign * dup_tokens

    def token_states(self) -> int:
        """Slots holding KV that is used, a shared block counted once."""
        return self.written_tokens - self.shared_tokens - self.fork_dup_tokens

    def check(self, written: int, internal: int, dup: int, shared: int) -> None:
        """Raise ``InvariantViolation`` naming the first sum that differs from its recomputed
        value (``written``, ``internal``, ``dup``, ``shared``)."""
        for name, actual, kept in (
            ("written_tokens", written, self.written_tokens),
            ("internal_slots", internal, self.internal_slots),
            ("fork_dup_tokens", dup, self.fork_dup_tokens),
            ("shared_tokens", shared, self.shared_tokens),
        ):
            if actual != kept:
                raise InvariantViolation(f"PagedKV.{name} is {kept}, recomputed {actual}")
