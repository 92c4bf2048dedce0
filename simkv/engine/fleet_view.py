"""What a fleet's router sees of its replicas: load signals, live or refreshed periodically.

Three load signals per replica, as real routers read them (SGLang's router counts its own
in-flight requests; llm-d scrapes vLLM's queue and KV-usage metrics):

* ``outstanding``: requests routed to the replica that it has not yet recorded (finished,
  rejected or aborted);
* ``outstanding_tokens``: their prompt + output tokens (the work routed and not done);
* ``kv_usage``: the replica's KV pool in use, blocks used / (used + free) (slots for the
  contiguous baselines).

With ``staleness_s == 0`` every read is live. Otherwise the signals are a snapshot that the
fleet refreshes every ``staleness_s`` (:meth:`FleetView.refresh`, from
:class:`simkv.engine.fleet.Fleet`'s refresher), so requests routed between two refreshes see
the same loads — the herding stale signals cause. The cached prefix of a request
(:meth:`FleetView.prefix_tokens`) is always read live from each replica's prefix cache, as
llm-d's precise prefix-cache scorer tracks the engines' KV events rather than polling.

A replica is read only through its public surface (:class:`Replica`, which
:class:`~simkv.engine.engine.Engine` implements): its load and a request's cached prefix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from simkv.workload.request import Workload

Loads = tuple[list[int], list[int], list[float]]  # outstanding, outstanding_tokens, kv_usage


class Replica(Protocol):
    """What the view reads of one replica (an :class:`~simkv.engine.engine.Engine`)."""

    def load(self) -> tuple[Sequence[int], float]:
        """(the requests recorded so far, in the order they left — a live view, read only;
        the KV pool's share in use)."""
        ...

    def cached_prefix_tokens(self, i: int, now: float) -> int:
        """Tokens of request ``i``'s prompt in the replica's prefix cache (whole blocks, as
        its scheduler would hit them at admission; 0 without prefix caching)."""
        ...

    def prefix_sources(self, i: int, now: float) -> dict[str, int]:
        """Tokens of request ``i``'s prompt in HBM (``hbm``) and after them in each KV tier."""


class FleetView:
    """The router's view of ``replicas`` (in fleet order).

    Invariants: ``routed[r] ≥`` requests replica ``r`` has recorded; a snapshot is a copy (a
    stale view never changes between refreshes)."""

    def __init__(self, replicas: Sequence[Replica], workload: Workload, staleness_s: float) -> None:
        self.replicas = replicas
        self.size = len(replicas)
        self.staleness_s = staleness_s
        self._work = (workload.prompt_tokens + workload.output_tokens).astype(np.int64).tolist()
        self._prompt = workload.prompt_tokens.astype(np.int64).tolist()
        self.routed = [0] * self.size
        self._routed_tokens = [0] * self.size
        self._done_tokens = [0] * self.size
        self._seen = [0] * self.size  # recorded requests whose tokens are in _done_tokens
        self._snapshot: Loads = self._live()

    def note_routed(self, r: int, i: int) -> None:
        """Request ``i`` went to replica ``r``."""
        self.routed[r] += 1
        self._routed_tokens[r] += self._work[i]

    def refresh(self) -> None:
        """Take a new snapshot of the loads (a stale view's refresh tick)."""
        self._snapshot = self._live()

    def loads(self) -> Loads:
        """(outstanding, outstanding_tokens, kv_usage) per replica, as the router sees them."""
        return self._live() if self.staleness_s == 0 else self._snapshot

    def prompt_tokens(self, i: int) -> int:
        """Prompt length of request ``i``, tokens."""
        return self._prompt[i]

    def prefix_tokens(
        self, i: int, now: float, weights: Mapping[str, float] | None = None
    ) -> list[float]:
        """Tokens of request ``i``'s prompt cached on each replica (whole blocks, as the
        replica's scheduler would hit them at admission; 0 without prefix caching). With
        ``weights`` (tier kind, or ``hbm``, to weight), the tokens found in HBM and in each KV
        tier after them, each times its weight (:mod:`simkv.engine.tiers`)."""
        if weights is None:
            return [replica.cached_prefix_tokens(i, now) for replica in self.replicas]
        return [
            sum(weights.get(kind, 0.0) * n for kind, n in replica.prefix_sources(i, now).items())
            for replica in self.replicas
        ]

    def _live(self) -> Loads:
        outstanding, tokens, usage = [], [], []
        work = self._work
        for r, replica in enumerate(self.replicas):
            done, kv_usage = replica.load()
            seen = self._seen[r]
            if len(done) > seen:
                self._done_tokens[r] += sum(work[i] for i in done[seen:])
                self._seen[r] = len(done)
            outstanding.append(self.routed[r] - len(done))
            tokens.append(self._routed_tokens[r] - self._done_tokens[r])
            usage.append(kv_usage)
        return outstanding, tokens, usage
