"""One offload tier's blocks under their content keys: capacity, readiness, holds, eviction.

A :class:`TierStore` knows nothing of time: the engine (:mod:`simkv.engine.tiers`) begins a
store (:meth:`TierStore.begin_store`: room is made now, the blocks are *pending*), finishes it
when its bytes have arrived (:meth:`TierStore.finish_store`: they are *ready*, a lookup finds
them), and holds the blocks a load reads (:meth:`TierStore.hold` … :meth:`TierStore.release`).
This is the life of a block in vLLM's offloading managers (``vllm/v1/kv_offload/
lru_manager.py``, 0.11+: ``prepare_store`` / ``complete_store``, ``prepare_load`` /
``complete_load``, a lookup stopping at the first block that is not ready).

Invariants (:meth:`TierStore.check`): ``used`` blocks (pending and ready) never exceed
``capacity`` and equal the blocks stored less those evicted (none is lost or made up); a key
is pending or ready, never both; only ready keys are held; a full tier evicts only ready,
unheld blocks whose retention pin (:meth:`TierStore.pin`) has ended; when none is left, the
rest of a store is dropped (``dropped``), as vLLM's ``prepare_store`` returns None.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from simkv.kv.errors import InvariantViolation
from simkv.kv.tier_policies import TierPolicy

__all__ = ["TierStore"]

PENDING, READY = 0, 1


class TierStore:
    """``capacity`` blocks of one tier, evicted in the order ``policy`` gives; ``clock`` is
    the tier's step count (advanced by its users, read by the policy)."""

    def __init__(self, capacity: int, policy: TierPolicy) -> None:
        if capacity < 1:
            raise InvariantViolation(f"a tier of {capacity} blocks holds nothing")
        self.capacity = capacity
        self.policy = policy
        self.clock = 0
        self.now_s = 0.0  # the simulated time, set by the tier's users (pins expire by it)
        self._pins: dict[int, float] = {}  # key -> time its retention pin ends
        self._pin_ends: list[tuple[float, int]] = []  # heap of (pin end, key), some stale
        # no block could be evicted, and nothing has changed since: a full tier's stores are
        # dropped without scanning again until a store ends, a load ends or a pin ends
        self._stuck = False
        self._state: dict[int, int] = {}  # key -> PENDING | READY
        self._holds: dict[int, int] = {}  # key -> loads reading it
        self.stored = 0  # blocks that entered (stores begun)
        self.evicted = 0
        self.dropped = 0  # blocks a store could not place (no evictable block)

    @property
    def used(self) -> int:
        """Blocks held, pending or ready."""
        return len(self._state)

    def ready(self, key: int) -> bool:
        """Whether ``key``'s block is in the tier and may be loaded."""
        return self._state.get(key) == READY

    def run_length(self, keys: Sequence[int], start: int, stop: int) -> int:
        """How many of ``keys[start:stop]`` are ready, consecutively from ``start``."""
        state, n = self._state, 0
        for j in range(start, stop):
            if state.get(keys[j]) != READY:
                break
            n += 1
        return n

    def begin_store(self, keys: Sequence[int]) -> tuple[list[int], list[int]]:
        """Make room for and reserve the blocks of ``keys`` not in the tier yet (pending);
        returns (the keys reserved, the keys evicted for them, in order)."""
        placed: list[int] = []
        evicted: list[int] = []
        state, policy = self._state, self.policy
        for key in keys:
            if key in state:
                continue
            if len(state) >= self.capacity:
                victim = None if self._stuck and not self._thawed() else self._victim()
                if victim is None:
                    self._stuck = True
                    self.dropped += 1
                    continue
                evicted.append(victim)
            state[key] = PENDING
            policy.add(key, self.clock)
            placed.append(key)
        self.stored += len(placed)
        return placed, evicted

    def pin(self, keys: Sequence[int], until_s: float) -> None:
        """Keep ``keys``' blocks (present or stored later) from eviction until ``until_s``
        (a retention hint: a prompt-caching TTL); a later pin extends an earlier one."""
        pins, ends = self._pins, self._pin_ends
        for key in keys:
            if pins.get(key, 0.0) < until_s:
                pins[key] = until_s
                heapq.heappush(ends, (until_s, key))
        if len(ends) > 2 * len(pins) + 1024:  # drop the stale entries now and then
            self._pin_ends = [(until, key) for key, until in pins.items()]
            heapq.heapify(self._pin_ends)

    def _thawed(self) -> bool:
        """Whether a pin has ended since the tier got stuck (it may have a victim again)."""
        ends, now = self._pin_ends, self.now_s
        if not ends or ends[0][0] > now:
            return False
        while ends and ends[0][0] <= now:
            heapq.heappop(ends)
        self._stuck = False
        return True

    def _evictable(self, key: int) -> bool:
        """Ready, unheld and not pinned (an expired pin is dropped)."""
        if self._state[key] != READY or key in self._holds:
            return False
        until = self._pins.get(key)
        if until is None:
            return True
        if until > self.now_s:
            return False
        del self._pins[key]
        return True

    def _victim(self) -> int | None:
        """Evict the policy's first ready, unheld, unpinned block (None if there is none)."""
        state = self._state
        candidates = self.policy.victims()
        victim = next((k for k in candidates if self._evictable(k)), None)
        close = getattr(candidates, "close", None)
        if close is not None:
            close()
        if victim is not None:
            del state[victim]
            self.policy.remove(victim)
            self.evicted += 1
        return victim

    def finish_store(self, keys: Sequence[int]) -> None:
        """The bytes of pending ``keys`` arrived: they are ready."""
        state = self._state
        for key in keys:
            if state.get(key) != PENDING:
                raise InvariantViolation(f"tier block {key} finished a store it did not begin")
            state[key] = READY
        self._stuck = False

    def hold(self, keys: Sequence[int]) -> None:
        """A load reads the ready ``keys`` (a hit each): they may not leave until released."""
        holds, state, policy, clock = self._holds, self._state, self.policy, self.clock
        for key in keys:
            if state.get(key) != READY:
                raise InvariantViolation(f"tier block {key} loaded while not ready")
            holds[key] = holds.get(key, 0) + 1
            policy.hit(key, clock)

    def release(self, keys: Sequence[int]) -> None:
        """The load of ``keys`` ended."""
        holds = self._holds
        for key in keys:
            left = holds[key] - 1
            if left:
                holds[key] = left
            else:
                del holds[key]
        self._stuck = False

    def check(self) -> None:
        """Raise :class:`InvariantViolation` when an invariant (module docstring) fails."""
        if len(self._state) > self.capacity:
            raise InvariantViolation(f"tier holds {len(self._state)} > {self.capacity} blocks")
        if len(self._state) != self.stored - self.evicted:
            raise InvariantViolation(
                f"tier holds {len(self._state)} blocks, not stored {self.stored} - evicted "
                f"{self.evicted}"
            )
        for key in self._holds:
            if self._state.get(key) != READY:
                raise InvariantViolation(f"tier block {key} held while not ready")
