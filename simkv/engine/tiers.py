"""One replica's KV offload tiers: what its scheduler stores there and loads back.

The semantics follow vLLM's ``OffloadingConnector`` (``distributed/kv_transfer/kv_connector/
v1/offloading_connector.py``, 0.11+, with its ``LRUOffloadingManager``), over an ordered list
of tiers (:mod:`simkv.config.tiers`):

* **Store** (``write_through``): after each step, every full block of a scheduled request
  that is computed and not stored yet, prompt and output alike, is stored in the first tier
  (``_get_reqs_to_store``: one transfer per step, from the replica's GPUs); a tier below a
  ``write_through`` tier gets each block when the tier above has it. With ``on_evict`` a tier
  gets a block when the tier above evicts it (the first tier: when HBM's prefix cache reuses
  its block). A block is found by a lookup only once its bytes arrived; a full tier evicts
  by its policy (:mod:`simkv.kv.tier_policies`), and a store with no block to evict is dropped.
  Each request's blocks are stored once (``Seq.stored_upto``; after a preemption too), and
  blocks it loaded are not stored again. With the first tier's ``stored_blocks: prompt`` only the
  prompt's full blocks are stored, as LMCache does by default (``save_decode_cache: false``).
* **Load**: when the scheduler admits a waiting request, after its HBM hits
  (``get_computed_blocks``), the following blocks are looked up tier by tier, each in the
  first tier that has it ready, up to the first block no tier has (at most ``num_tokens - 1``
  tokens, whole blocks: ``get_num_new_matched_tokens``). With a hit, the request gets GPU
  blocks for all its tokens now (its blocks cached only once loaded) and leaves the waiting
  queue while each tier sends its part (``WAITING_FOR_REMOTE_KVS``); the loads use no token
  budget. (vLLM 0.11 allocates blocks for the loaded tokens alone, ``allocate_slots`` of the
  external tokens, and waiting loads that hold every block would then wait for each other
  for ever; simkv reserves the prompt as 0.32's ``scheduler_reserve_full_isl`` admits it.)
  Once every part arrived, it waits again at the head of the queue with the loaded tokens
  computed, and is admitted as any request, its prefill starting after them
  (``_update_waiting_for_remote_kv``). The load
  time is on its TTFT path, never free.

Retention hints (a workload's ``pin_ttl_s``, :mod:`simkv.config.agentic`): a request's stored
prefix is pinned in every tier for its TTL from the step that stored it, as a prompt-caching
API keeps a marked prefix (each later call of the session renews it); a pinned block is never
evicted, and a store that finds only pinned blocks is dropped. HBM's prefix cache ignores pins.

Not modelled: vLLM's cap on concurrent loads (``max_num_seqs``) and its delay of a request
whose blocks another request is loading (both load); a finished request's blocks are freed
at once, not after their store ends (the store's bytes are priced on the link either way).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simkv.engine.memory.paged import PagedKV
from simkv.engine.queues import WaitingQueue
from simkv.engine.request.seq import Seq
from simkv.engine.tier_net import TierNet
from simkv.kv.allocator import BlockId, InvariantViolation


class ReplicaTiers:
    """Replica ``replica``'s view of ``net``: its tiers are ``net`` tiers ``tiers`` in order,
    each storing ``write_through`` or ``on_evict`` (``policies``); ``kv`` and ``waiting`` are
    its scheduler's. Invariant: a request in :attr:`loading` holds GPU blocks for its hits and
    loaded blocks and is in no queue."""

    def __init__(
        self,
        net: TierNet,
        replica: int,
        tiers: list[int],
        on_evict: list[bool],
        kv: PagedKV,
        waiting: WaitingQueue,
    ) -> None:
        self.net = net
        self.replica = replica
        self.tiers = tiers
        self.on_evict = on_evict
        self.kv = kv
        self.waiting = waiting
        self.block_size = kv.block_size
        # request -> (it, its parts still in flight, its parts, tokens it has once loaded)
        self.loading: dict[int, tuple[Seq, int, list[tuple[int, list[int]]], int]] = {}
        self.wake: Callable[[], None] = lambda: None  # the engine's wake_up
        self.pin_ttl_s: list[float] | None = None  # per request: its retention hint, s
        self.prompt_only = False  # store only prompt blocks (the first tier's ``stored_blocks``)
        cache = kv.cache
        if on_evict[0]:
            if cache is None or not hasattr(cache, "evicted_keys"):
                raise InvariantViolation("a first tier storing on eviction needs hash caching")
            cache.evicted_keys = []  # type: ignore[union-attr]

    # -- loads ---------------------------------------------------------------------------
    def lookup(self, seq: Seq, gpu_blocks: int) -> list[tuple[int, list[int]]]:
        """The blocks of ``seq`` after its ``gpu_blocks`` HBM hits found in the tiers, as
        (tier, keys) runs in order; empty when the next block is in none."""
        keys = seq.keys
        if keys is None or keys.owner is not None:
            return []  # private keys: no other request wrote them
        limit = (seq.num_tokens - 1) // self.block_size
        if limit <= gpu_blocks:
            return []
        stream = keys.extend(limit)
        stores, parts, j = self.net.stores, [], gpu_blocks
        while j < limit:
            for t in self.tiers:
                n = stores[t].run_length(stream, j, limit)
                if n:
                    parts.append((t, list(stream[j : j + n])))
                    j += n
                    break
            else:
                break
        return parts

    def sources(self, seq: Seq) -> dict[str, int]:
        """Tokens of a waiting ``seq``'s prompt in HBM (``hbm``) and after them in each kind
        of tier, as its admission would find them (nothing changes)."""
        hits = self.kv.prefix.cached_prefix(seq)
        found = {"hbm": len(hits) * self.block_size}
        for t, keys in self.lookup(seq, len(hits)):
            kind = self.net.kinds[t]
            found[kind] = found.get(kind, 0) + len(keys) * self.block_size
        return found

    def load(
        self, seq: Seq, hits: list[BlockId], parts: list[tuple[int, list[int]]], now: float
    ) -> bool:
        """Reserve ``seq``'s GPU blocks (all its tokens', its ``hits`` first) and start the
        loads of the ``parts`` found in the tiers; False (nothing changed) when the blocks
        are short."""
        loaded = sum(len(keys) for _, keys in parts)
        if not self.kv.reserve_remote(seq, hits):
            return False
        net, i = self.net, seq.req_id
        net.load_start_s[i] = now
        # its loaded blocks are not stored again (``update_state_after_alloc``)
        seq.stored_upto = max(seq.stored_upto, len(hits) + loaded)
        self.loading[i] = (seq, len(parts), parts, (len(hits) + loaded) * self.block_size)
        for t, keys in parts:
            net.stores[t].hold(keys)
            net.hit_tokens[net.kinds[t]][i] += len(keys) * self.block_size
            net.send(net.node(t), self.replica, len(keys), net.latency_s[t], self._part_done(i))
        return True

    def _part_done(self, i: int) -> Callable[[float], None]:
        return lambda now: self._arrived(i, now)

    def _arrived(self, i: int, now: float) -> None:
        """One part of request ``i``'s load arrived; when the last has, it waits to run."""
        seq, left, parts, computed = self.loading[i]
        if left > 1:
            self.loading[i] = (seq, left - 1, parts, computed)
            return
        del self.loading[i]
        for t, keys in parts:
            self.net.stores[t].release(keys)
        self.net.load_end_s[i] = now
        self.kv.receive(seq, computed)
        self.waiting.push_front(seq)  # (its table counts its reserved slots until it runs)
        self.wake()

    # -- stores --------------------------------------------------------------------------
    def after_step(self, seqs: list[Seq]) -> None:
        """Store what the step computed (write-through) or HBM evicted (on eviction) in the
        first tier, and advance the tiers' step clocks."""
        net, now = self.net, self.net.env.now
        for t in self.tiers:
            store = net.stores[t]
            store.clock += 1
            store.now_s = now
        if self.on_evict[0]:
            evicted = self.kv.cache.evicted_keys  # type: ignore[union-attr]
            if evicted:
                self._store(self.replica, 0, list(evicted))
                evicted.clear()
            return
        bs, new = self.block_size, []
        for seq in seqs:
            keys = seq.keys
            full = seq.num_computed // bs
            if self.prompt_only:
                full = min(full, seq.prompt_tokens // bs)
            if full > seq.stored_upto and keys is not None and keys.owner is None:
                stream, old = keys.extend(full), seq.stored_upto
                new += stream[old:full]
                seq.stored_upto = full
                if self.pin_ttl_s is not None and self.pin_ttl_s[seq.req_id] > 0:
                    # its prefix while it prefills (a renewal of what earlier calls stored),
                    # then each block its answer fills
                    lo = 0 if seq.num_output <= 1 else old
                    self._pin(stream[lo:full], now + self.pin_ttl_s[seq.req_id])
        if new:
            self._store(self.replica, 0, new)

    def _pin(self, keys: Sequence[int], until_s: float) -> None:
        """Pin a request's stored prefix in every tier until ``until_s`` (its retention hint,
        as a prompt-caching API's TTL: renewed by each later call that stores it)."""
        for t in self.tiers:
            self.net.stores[t].pin(keys, until_s)

    def _store(self, src: int, k: int, keys: list[int]) -> None:
        """Store ``keys`` from node ``src`` in this replica's ``k``-th tier, and pass on what
        it evicts (to a tier below storing on eviction)."""
        net, t = self.net, self.tiers[k]
        placed, evicted = net.stores[t].begin_store(keys)
        below = k + 1 < len(self.tiers)
        if evicted and below and self.on_evict[k + 1]:
            self._store(net.node(t), k + 1, evicted)
        if placed:
            net.stored(t)
            done = self._stored(k, placed)
            net.send(src, net.node(t), len(placed), net.latency_s[t], done)

    def _stored(self, k: int, keys: list[int]) -> Callable[[float], None]:
        def done(_now: float) -> None:
            t = self.tiers[k]
            self.net.stores[t].finish_store(keys)
            self.net.stored(t)
            if k + 1 < len(self.tiers) and not self.on_evict[k + 1]:
                self._store(self.net.node(t), k + 1, keys)

        return done

    def pending(self) -> bool:
        """Whether requests wait for loads (the replica is not stalled while they do)."""
        return bool(self.loading)

    def resident(self) -> list[Seq]:
        """The requests loading, and those loaded and waiting to run (each holds GPU
        blocks; a waiting request with computed tokens is one of them)."""
        loaded = [seq for seq in self.waiting if seq.num_computed]
        return [*(entry[0] for entry in self.loading.values()), *loaded]
