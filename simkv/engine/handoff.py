"""One replica's side of prefill/decode KV hand-overs (vLLM's ``NixlConnector``, 0.11–0.32:
``v1/core/sched/scheduler.py`` and ``distributed/kv_transfer/kv_connector/v1/nixl``).

A prefill replica runs each request it gets as a one-token request (the proxy's
``max_tokens=1`` with ``do_remote_decode``); when it finishes, its blocks are not freed but
*held* (the connector's ``request_finished`` delays the free) until the decode side has read
them (:meth:`Handoff.release`). A decode replica gets the request once its prefill finished
(``do_remote_prefill``; at routing time over a layer-wise link, :mod:`simkv.engine.layerwise`,
the KV then crossing as it is computed): when its scheduler reaches the request in the waiting
queue it reserves blocks for the whole prompt beyond its own cached prefix (``allocate_slots``
for the external tokens, the request set aside as ``WAITING_FOR_REMOTE_KVS``) and the transfer
starts (:meth:`Handoff.reserve`); once the KV has arrived (:meth:`Handoff.received`) the request
waits again, at the head of the queue, with every prompt token but the last computed
(``_update_waiting_for_remote_kv``), and its first step recomputes that token and samples the
first output token. Held and receiving requests hold GPU blocks without running.

``Seq.remote`` says where a decode replica's request is: :data:`PENDING` (no blocks yet),
:data:`RECEIVING`, :data:`RECEIVED` (waiting to run), 0 once it runs (a later preemption
recomputes it locally, as vLLM does).
"""

from __future__ import annotations

from typing import Protocol

from simkv.engine.memory.paged import PagedKV
from simkv.engine.queues import WaitingQueue
from simkv.engine.request.seq import Seq
from simkv.kv.allocator import BlockId, InvariantViolation

PENDING, RECEIVING, RECEIVED = 1, 2, 3


class KVPort(Protocol):
    """What a replica tells the fleet's disaggregation (:mod:`simkv.engine.disagg`)."""

    def finished(self, replica: int, seq: Seq, now: float) -> bool:
        """Decode replica ``replica`` finished ``seq`` (the return path is on): whether its
        KV is sent back (its blocks are then held until sent, :mod:`simkv.engine.kv_return`)."""

    def prefilled(self, replica: int, seq: Seq, now: float) -> None:
        """Prefill replica ``replica`` finished ``seq``'s prompt; its blocks are held."""

    def reserved(self, replica: int, seq: Seq, tokens: int, now: float) -> None:
        """Decode replica ``replica`` reserved blocks for ``tokens`` tokens of ``seq`` that
        it does not hold: the transfer starts."""


class Handoff:
    """The held (a prefill replica's: ``prefills``) or receiving and received (a decode
    replica's) requests of replica ``replica``, whose KV memory is ``kv``.

    With the return path (:mod:`simkv.engine.kv_return`) a decode replica holds a finished
    request's blocks (``held``) until its KV is sent back (``returns``), and a prefill replica
    holds the blocks it reserved for KV coming back (``returning``).

    Invariant: every request here holds GPU blocks and is in no running list."""

    def __init__(
        self,
        kv: PagedKV,
        waiting: WaitingQueue,
        port: KVPort,
        replica: int,
        *,
        prefills: bool,
        returns: bool = False,
    ) -> None:
        self.prefills = prefills  # a prefill replica (else a decode one)
        self.returns = returns and not prefills  # a decode replica sending KV back
        self.kv = kv
        self.waiting = waiting
        self.port = port
        self.replica = replica
        self.held: dict[int, Seq] = {}
        self.receiving: dict[int, Seq] = {}
        self.received: dict[int, Seq] = {}  # waiting to run
        self.returning: dict[int, Seq] = {}  # a prefill replica's blocks for KV coming back

    def hold(self, seq: Seq, now: float) -> None:
        """A request finished: a prefill replica keeps its blocks until they are read; a
        decode replica sending KV back keeps them while they are sent, else frees them."""
        if self.prefills:
            self.held[seq.req_id] = seq
            self.port.prefilled(self.replica, seq, now)
        elif self.port.finished(self.replica, seq, now):
            self.held[seq.req_id] = seq
        else:
            self.kv.free(seq)

    def reserve_return(self, seq: Seq, tokens: int) -> int | None:
        """A prefill replica's blocks for the first ``tokens`` tokens of ``seq``'s KV, beyond
        its cached prefix: the tokens to receive (0: none, nothing held), None when short."""
        sent = self.kv.reserve_return(seq, tokens)
        if sent:
            self.returning[seq.req_id] = seq
        return sent

    def land_return(self, i: int) -> None:
        """Request ``i``'s KV came back: into the prefix cache, its blocks free."""
        self.kv.land_return(self.returning.pop(i))

    def release(self, i: int) -> None:
        """Request ``i``'s KV was read: free its held blocks (into the prefix cache)."""
        self.kv.free(self.held.pop(i))

    def reserve(self, seq: Seq, hits: list[BlockId], now: float) -> bool:
        """A decode replica's pending ``seq`` at the head of the queue: its blocks (on its
        cached ``hits``), and the transfer of the rest; False when the blocks are short."""
        if not self.kv.reserve_remote(seq, hits):
            return False
        tokens = seq.num_tokens - seq.num_computed
        if seq.prefix_hit_tokens is None:
            seq.prefix_hit_tokens = seq.num_computed
        seq.cache_hit_tokens += seq.num_computed
        seq.remote = RECEIVING
        self.receiving[seq.req_id] = seq
        self.port.reserved(self.replica, seq, tokens, now)
        return True

    def arrived(self, i: int) -> None:
        """Request ``i``'s KV arrived: it waits to run, at the head of the queue (vLLM set it
        aside there, ``skipped_waiting_requests``, while it was receiving)."""
        seq = self.receiving.pop(i)
        self.kv.receive(seq)
        seq.remote = RECEIVED
        self.received[i] = seq
        self.waiting.push_front(seq)

    def start(self, seq: Seq) -> None:
        """A received ``seq`` is admitted to run its last prompt token (slots it holds)."""
        if self.received.pop(seq.req_id, None) is not seq:
            raise InvariantViolation(f"{seq} runs before its KV arrived")
        seq.remote = 0
        if not self.kv.allocate_with_prefix(seq, None, 1):  # (on the blocks it holds)
            raise InvariantViolation(f"{seq}: its received blocks have no slot for its last token")

    def pending(self) -> bool:
        """Whether blocks are held for a hand-over in progress (the replica is not stalled
        while they are: a transfer's end frees or fills them)."""
        return bool(self.held or self.receiving or self.returning)

    def resident(self) -> list[Seq]:
        """Every request here (each holds GPU blocks)."""
        return [
            *self.held.values(), *self.receiving.values(), *self.received.values(),
            *self.returning.values(),
        ]  # fmt: skip
