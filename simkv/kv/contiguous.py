"""Contiguous per-request KV reservations: the baselines that paging replaced.

Before PagedAttention, a serving system gave each request one contiguous KV region sized up
front (Orca's *Max*, *Pow2* and *Oracle* policies), placed by a binary buddy allocator. The
:class:`BuddyAllocator` works in token slots; :class:`ContiguousAllocator` applies a
:class:`ReservationPolicy` on top of it and reports a :class:`~simkv.kv.waste.WasteBreakdown`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from simkv.kv.errors import InvariantViolation, OutOfBlocks
from simkv.kv.waste import WasteBreakdown


def next_pow2(n: int) -> int:
    """Smallest power of two ≥ ``n`` (1 for ``n <= 1``)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _pow2_pieces(offset: int, size: int) -> list[tuple[int, int]]:
    """Split ``[offset, offset + size)`` into aligned power-of-two pieces, low to high."""
    pieces = []
    end = offset + size
    while offset < end:
        piece = 1 << (end - offset).bit_length() - 1
        while offset % piece:
            piece //= 2
        pieces.append((offset, piece))
        offset += piece
    return pieces


@dataclass(frozen=True, slots=True)
class Chunk:
    """A contiguous run of token slots ``[offset, offset + size)``."""

    offset: int
    size: int

    @property
    def end(self) -> int:
        return self.offset + self.size


class BuddyAllocator:
    """Binary buddy allocator over ``capacity_slots`` token slots.

    The capacity is split into maximal power-of-two top-level regions laid out largest first
    (15728 = 8192 + 4096 + 2048 + ...), so every region starts at a multiple of its own size and
    a chunk's buddy is ``offset ^ size``; chunks never merge across regions. Invariants
    (``check``): free and allocated chunks tile the capacity without overlap; every free chunk is
    a power of two ≥ ``min_chunk_slots`` aligned to its size; no two free buddies of equal size
    coexist (freeing always coalesces). ``alloc`` takes the lowest-offset chunk of the smallest
    sufficient size, so placement is deterministic.
    """

    def __init__(self, capacity_slots: int, min_chunk_slots: int = 1) -> None:
        if min_chunk_slots < 1 or min_chunk_slots & (min_chunk_slots - 1):
            raise ValueError(f"min_chunk_slots must be a power of two, got {min_chunk_slots}")
        if capacity_slots < 1 or capacity_slots % min_chunk_slots:
            raise ValueError(
                f"capacity_slots must be a positive multiple of {min_chunk_slots}, "
                f"got {capacity_slots}"
            )
        self.capacity_slots = capacity_slots
        self.min_chunk_slots = min_chunk_slots
        self._free: dict[int, set[int]] = {}
        self._used: dict[int, int] = {}
        self._roots = tuple(_pow2_pieces(0, capacity_slots))
        for offset, size in self._roots:
            self._free.setdefault(size, set()).add(offset)

    @property
    def max_chunk_slots(self) -> int:
        """Size of the largest top-level region: no allocation can ever exceed it."""
        return self._roots[0][1]

    @property
    def free_slots(self) -> int:
        return sum(size * len(offsets) for size, offsets in self._free.items())

    @property
    def largest_free_chunk(self) -> int:
        """Size of the largest free chunk in slots (0 when the pool is full)."""
        return max((size for size, offsets in self._free.items() if offsets), default=0)

    def free_chunk_sizes(self) -> list[int]:
        """Sizes of all free chunks, ascending."""
        return sorted(size for size, offsets in self._free.items() for _ in offsets)

    def chunk_slots(self, size_slots: int) -> int:
        """Size ``alloc(size_slots)`` hands out: next power of two ≥ size and ≥ min chunk."""
        return max(next_pow2(size_slots), self.min_chunk_slots)

    def alloc(self, size_slots: int, *, exact: bool = False) -> Chunk:
        """Allocate a chunk of ``chunk_slots(size_slots)`` slots at the lowest fitting offset.

        With ``exact`` the chunk is trimmed to ``size_slots`` rounded up to a multiple of the min
        chunk, and the trimmed tail goes back to the free lists (like an exact page allocation).
        Raises :class:`OutOfBlocks` (in slots) when no free chunk is large enough, even if the
        free total would suffice: that shortfall is external fragmentation.
        """
        if size_slots < 1:
            raise ValueError(f"size_slots must be >= 1, got {size_slots}")
        need = self.chunk_slots(size_slots)
        size = min((s for s, offs in self._free.items() if offs and s >= need), default=None)
        if size is None:
            raise OutOfBlocks(need, self.free_slots)
        offset = min(self._free[size])
        self._free[size].remove(offset)
        while size > need:
            size //= 2
            self._free.setdefault(size, set()).add(offset + size)
        if exact:
            keep = -(-size_slots // self.min_chunk_slots) * self.min_chunk_slots
            for piece_offset, piece in _pow2_pieces(offset + keep, need - keep):
                self._release(piece_offset, piece)
            need = keep
        self._used[offset] = need
        return Chunk(offset, need)

    def free(self, offset: int) -> None:
        """Free the chunk allocated at ``offset``, coalescing buddies as far as possible."""
        size = self._used.pop(offset, None)
        if size is None:
            raise ValueError(f"no allocated chunk at offset {offset}")
        for piece_offset, piece in _pow2_pieces(offset, size):
            self._release(piece_offset, piece)

    def _release(self, offset: int, size: int) -> None:
        root = next(s for o, s in self._roots if o <= offset < o + s)
        while size < root:
            buddy = offset ^ size
            peers = self._free.get(size)
            if peers is None or buddy not in peers:
                break
            peers.remove(buddy)
            offset, size = min(offset, buddy), size * 2
        self._free.setdefault(size, set()).add(offset)

    def check(self) -> None:
        """Raise ``InvariantViolation`` if an invariant in the class docstring does not hold."""
        free = [(o, s) for s, offs in self._free.items() for o in offs]
        runs = sorted(free + list(self._used.items()))
        position = 0
        for offset, size in runs:
            _require(offset == position, f"gap or overlap at slot {position} (next run {offset})")
            position += size
        _require(position == self.capacity_slots, "runs do not cover the capacity")
        free_set = set(free)
        root_of = {o: s for o, s in self._roots}
        for offset, size in free:
            _require(size & (size - 1) == 0 and size >= self.min_chunk_slots, f"bad size {size}")
            _require(offset % size == 0, f"free chunk {offset}+{size} misaligned")
            mergeable = root_of.get(offset, 0) != size and (offset ^ size, size) in free_set
            _require(not mergeable, f"free buddies {offset}+{size} not coalesced")


def _require(holds: bool, message: str) -> None:
    if not holds:
        raise InvariantViolation(message)


class ReservationPolicy(StrEnum):
    """How many slots a request reserves on admission (Orca's baselines).

    ``MAX``: ``max_context_len``. ``POW2``: next power of two ≥ prompt + output, capped at
    ``max_context_len``. ``ORACLE``: exactly prompt + output, placed without buddy rounding.
    """

    MAX = "max"
    POW2 = "pow2"
    ORACLE = "oracle"


@dataclass(slots=True)
class _Reservation:
    chunk: Chunk
    final_tokens: int
    length_tokens: int


class ContiguousAllocator:
    """Per-request contiguous KV reservations placed in a :class:`BuddyAllocator`.

    A request reserves on admission (its prompt is written at once) and keeps the whole chunk
    until ``release``. Slot accounting per resident request, with ``length`` tokens written,
    ``final = prompt + output`` and a chunk of ``size`` slots:

    * token states = ``length``;
    * reservation = ``final - length`` (future tokens it will write into the chunk);
    * internal fragmentation = ``size - final`` (over-reservation plus buddy rounding);

    and for the pool: external fragmentation = free slots in chunks smaller than
    ``demand_slots`` (the pending request's reservation), 0 when nothing is pending; free = the
    rest. The five parts always sum to ``capacity_slots``.
    """

    def __init__(
        self,
        capacity_slots: int,
        policy: ReservationPolicy,
        max_context_len: int,
        min_chunk_slots: int = 1,
    ) -> None:
        if max_context_len < 1:
            raise ValueError(f"max_context_len must be >= 1, got {max_context_len}")
        self.buddy = BuddyAllocator(capacity_slots, min_chunk_slots)
        self.policy = ReservationPolicy(policy)
        self.max_context_len = max_context_len
        self._requests: dict[int, _Reservation] = {}

    @property
    def capacity_slots(self) -> int:
        return self.buddy.capacity_slots

    def reservation_slots(self, prompt_tokens: int, output_tokens: int) -> int:
        """Slots the policy asks for; ``ValueError`` if prompt + output > max_context_len."""
        final = prompt_tokens + output_tokens
        if prompt_tokens < 0 or output_tokens < 0 or final < 1:
            raise ValueError(f"need prompt, output >= 0 and a non-empty request, got {final}")
        if final > self.max_context_len:
            raise ValueError(f"request of {final} tokens exceeds max_context_len")
        if self.policy is ReservationPolicy.MAX:
            return self.max_context_len
        if self.policy is ReservationPolicy.POW2:
            return min(next_pow2(final), self.max_context_len)
        return final

    def fits_when_empty(self, prompt_tokens: int, output_tokens: int) -> bool:
        """Whether the request could be placed in an empty pool (else it can never run)."""
        need = self.buddy.chunk_slots(self.reservation_slots(prompt_tokens, output_tokens))
        return need <= self.buddy.max_chunk_slots

    def can_reserve(self, prompt_tokens: int, output_tokens: int) -> bool:
        """Whether ``reserve`` would succeed now."""
        need = self.buddy.chunk_slots(self.reservation_slots(prompt_tokens, output_tokens))
        return need <= self.buddy.largest_free_chunk

    def reserve(self, req_id: int, prompt_tokens: int, output_tokens: int) -> Chunk:
        """Place the reservation and write the prompt; ``OutOfBlocks`` if no chunk fits."""
        if req_id in self._requests:
            raise ValueError(f"request {req_id} already holds a reservation")
        size = self.reservation_slots(prompt_tokens, output_tokens)
        chunk = self.buddy.alloc(size, exact=self.policy is ReservationPolicy.ORACLE)
        final = prompt_tokens + output_tokens
        self._requests[req_id] = _Reservation(chunk, final, prompt_tokens)
        return chunk

    def set_length(self, req_id: int, tokens_written: int) -> None:
        """Record that the request has written ``tokens_written`` tokens (≤ its final length)."""
        request = self._requests[req_id]
        if not 0 <= tokens_written <= request.final_tokens:
            raise ValueError(f"length {tokens_written} outside [0, {request.final_tokens}]")
        request.length_tokens = tokens_written

    def release(self, req_id: int) -> None:
        """Free the request's chunk (on completion)."""
        self.buddy.free(self._requests.pop(req_id).chunk.offset)

    def breakdown(self, demand_slots: int | None) -> WasteBreakdown:
        """The five-way split of the pool now (class docstring); ``demand_slots`` as there."""
        token = sum(r.length_tokens for r in self._requests.values())
        final = sum(r.final_tokens for r in self._requests.values())
        held = sum(r.chunk.size for r in self._requests.values())
        external = 0
        if demand_slots is not None:
            external = sum(s for s in self.buddy.free_chunk_sizes() if s < demand_slots)
        return WasteBreakdown(
            token_slots=token,
            reserved_slots=final - token,
            internal_frag_slots=held - final,
            external_frag_slots=external,
            free_slots=self.capacity_slots - held - external,
        )
