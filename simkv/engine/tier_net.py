"""The transfers that fill and read a run's KV offload tiers, and what they moved.

One :class:`TierNet` per run (a fleet's replicas share it, and with it a ``remote`` tier): a
:class:`~simkv.engine.transfer.TransferNet` whose nodes are each replica's GPUs (egress: its
device-to-host copies, ingress: host-to-device, each at the GPU's host link × its
tensor-parallel degree) and each tier (egress: its read bandwidth, ingress: its write
bandwidth). A load is a flow from a tier to a replica, a store one from a replica (or a tier
above) to a tier; concurrent flows share every node max-min fairly, after each flow's latency
(the tier's). One SimPy event per change of the flows in flight, none per block.

What it keeps: per request, the tokens each tier supplied and when its load began and ended
(:meth:`TierNet.columns`); per tier, bytes loaded and stored and its occupancy after each
store (:meth:`TierNet.occupancy`).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable

import numpy as np

from simkv.engine.flow_events import Clock, FlowEvents
from simkv.engine.transfer import TransferNet
from simkv.kv.tier_store import TierStore
from simkv.metrics.tiers import TierTotals

Done = Callable[[float], None]


class TierNet:
    """A run's tiers (``stores[t]``, named ``kinds[t]``, at node ``replicas + t``) and the
    flows between them and the replicas; ``block_bytes``: bytes of one block's KV in a whole
    replica (every replica sharing a tier has the same)."""

    def __init__(
        self,
        env: Clock,
        stores: list[TierStore],
        kinds: list[str],
        tier_bps: list[tuple[float, float]],
        latency_s: list[float],
        replica_bps: list[float],
        block_bytes: int,
        num_requests: int,
    ) -> None:
        self.env = env
        self.stores = stores
        self.kinds = kinds
        self.latency_s = latency_s
        self.replicas = len(replica_bps)
        self.block_bytes = block_bytes
        egress = [*replica_bps, *(read for read, _ in tier_bps)]
        ingress = [*replica_bps, *(write for _, write in tier_bps)]
        self.net = TransferNet(egress, ingress)
        self._done: dict[int, Done] = {}
        self._next_id = 0
        self.events = FlowEvents(env, self.net, self._flows_done)
        n, nan = num_requests, array("d", [math.nan])
        # tokens each kind of tier supplied, per request
        self.hit_tokens = {kind: array("q", bytes(8 * n)) for kind in dict.fromkeys(kinds)}
        self.load_start_s = nan * n
        self.load_end_s = nan * n
        self.loaded_bytes = [0] * len(stores)
        self.stored_bytes = [0] * len(stores)
        self._occupancy: list[tuple[float, int, int]] = []  # (time, tier, blocks used)

    def node(self, tier: int) -> int:
        """The network node of tier ``tier``."""
        return self.replicas + tier

    def send(self, src: int, dst: int, blocks: int, latency_s: float, done: Done) -> None:
        """Move ``blocks`` blocks from node ``src`` to node ``dst`` from now; ``done(t)``
        when the last byte arrived."""
        now = self.env.now
        flow, nbytes = self._next_id, blocks * self.block_bytes
        self._next_id += 1
        self._done[flow] = done
        tiers = self.replicas
        if src >= tiers:
            self.loaded_bytes[src - tiers] += nbytes if dst < tiers else 0
        if dst >= tiers:
            self.stored_bytes[dst - tiers] += nbytes
        self.net.advance(now)  # (finishes before this start keep their own time)
        self.net.start(flow, src, dst, nbytes, now, latency_s)
        self.events.changed()

    def stored(self, tier: int) -> None:
        """Note the occupancy of tier ``tier``'s kind now (after a store began or ended): the
        blocks used in every tier of that kind (each replica's own, summed)."""
        kind = self.kinds[tier]
        used = sum(s.used for s, k in zip(self.stores, self.kinds, strict=True) if k == kind)
        self._occupancy.append((self.env.now, tier, used))

    def _flows_done(self, flows: list[int], now: float) -> None:
        for flow in flows:
            self._done.pop(flow)(now)

    def columns(self) -> dict[str, np.ndarray]:
        """Per request: ``hit_tokens_<kind>`` (tokens each tier supplied, 0: none),
        ``tier_load_start_s`` and ``tier_load_end_s`` (NaN: it loaded nothing)."""
        cols = {
            f"hit_tokens_{kind}": np.frombuffer(hits, dtype=np.int64).copy()
            for kind, hits in self.hit_tokens.items()
        }
        cols["tier_load_start_s"] = np.frombuffer(self.load_start_s, dtype=np.float64).copy()
        cols["tier_load_end_s"] = np.frombuffer(self.load_end_s, dtype=np.float64).copy()
        return cols

    def totals(self) -> TierTotals:
        """What each tier moved and held, for the summary (:mod:`simkv.metrics.tiers`)."""
        stores = self.stores
        return TierTotals(
            list(self.kinds), list(self.loaded_bytes), list(self.stored_bytes),
            [s.evicted for s in stores], [s.dropped for s in stores], [s.capacity for s in stores],
        )  # fmt: skip

    def occupancy(self) -> dict[str, np.ndarray]:
        """Each tier kind's blocks in use after every store: ``time_s``, ``tier`` (its kind),
        ``blocks`` (over every tier of that kind)."""
        rows = np.array(self._occupancy, dtype=np.float64).reshape(-1, 3)
        return {
            "time_s": rows[:, 0],
            "tier": np.array([self.kinds[int(t)] for t in rows[:, 1]], dtype=object),
            "blocks": rows[:, 2].astype(np.int64),
        }
