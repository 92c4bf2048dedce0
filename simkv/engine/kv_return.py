"""The return path of prefill/decode disaggregation (``disaggregation.return_kv: true``): a
finished request's KV goes back to the prefill replica that prefilled it, so a session's next
turn prefilled there hits the whole conversation (prompt and answer) in its prefix cache.

Without it a later turn prefilled on a prefill replica hits only what that replica computed
itself (the earlier turns' prompts): the answers were decoded elsewhere. vLLM's
``NixlConnector`` (0.11–0.32) and Dynamo move KV one way, prefill to decode; Mooncake and
LMCache reach the same reuse through a shared KV store (the decode side offloads, a later
prefill loads). simkv models the direct version, priced like any transfer:

1. When request ``i`` finishes on decode replica ``d`` (prefilled on ``p``), ``p`` looks up
   the request's whole key stream (prompt and answer) in its prefix cache and reserves blocks
   for the full blocks of ``d``'s computed KV (``prompt + output − 1`` tokens, whole blocks of
   ``p``'s block size) beyond its cached prefix, the prefix pinned
   (:meth:`~simkv.engine.memory.paged.PagedKV.reserve_return`): what it lacks is the answer's
   blocks (the block across the prompt's end included) and any prompt block it evicted since.
   When its cached prefix covers them, or the request has no content keys (no other request
   could hit them), nothing is sent.
2. When ``p`` has too few free blocks the return is dropped (counted, ``dropped``): a receiver
   writes into blocks it allocated, as the forward path's decode side does.
3. Otherwise a flow ``d → p`` of ``tokens × kv_bytes_per_token`` bytes starts at once over
   the link (:mod:`simkv.engine.transfer`: its latency, then the bytes at a fair share of
   ``d``'s egress and ``p``'s ingress NIC; forward flows use the other direction of each, so
   they compete only with other returns). ``d`` holds the request's blocks until then.
4. At its end ``d`` frees its blocks (into its own prefix cache, as at any finish) and ``p``
   registers the received blocks in its prefix cache, free and evictable.

The request's follow-up turn is released at its finish (step 1), not at the return's end: a
turn arriving before the return landed misses the answer's blocks. Which prefill replica the
next turn goes to is the prefill router's choice: ``prefix_aware`` or ``weighted`` (with a
prefix weight) find the returned blocks, ``session_affinity`` keeps a session on one replica.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable

import numpy as np

from simkv.engine.engine import Engine
from simkv.engine.handoff import Handoff
from simkv.engine.request.seq import Seq
from simkv.engine.transfer import TransferNet


class ReturnPath:
    """The returns of one fleet run over ``net``; request ``i``'s flow is ``n + i`` (forward
    flows are ``i``). ``handoff(r)`` is replica ``r``'s hand-offs; ``prefill_of[i]`` request
    ``i``'s prefill replica (-1: local); ``changed()`` re-arms the transfers' next event.

    Invariants: a request's KV goes back at most once, from the replica that decoded it to the
    one that prefilled it; every byte sent back is received once (``kv_return_bytes``)."""

    def __init__(
        self,
        net: TransferNet,
        replicas: list[Engine],
        handoff: Callable[[int], Handoff],
        prefill_of: array,
        *,
        kv_bytes_per_token: int,
        latency_s: float,
        changed: Callable[[], None],
    ) -> None:
        self.net = net
        self.replicas = replicas
        self.handoff = handoff
        self.prefill_of = prefill_of
        self.kv_bytes_per_token = kv_bytes_per_token
        self.latency_s = latency_s
        self.changed = changed
        n = self.n = len(prefill_of)
        nan = array("d", [math.nan])
        self.sent_s = nan * n  # the return started
        self.arrived_s = nan * n  # it landed in the prefill replica's cache
        self.nbytes = array("q", bytes(8 * n))
        self.decode_of = array("q", [-1]) * n
        self.dropped = 0  # returns the prefill replica had no free blocks for

    def finished(self, d: int, seq: Seq, now: float) -> bool:
        """Request ``seq`` finished on decode replica ``d`` at ``now``: send its KV back
        (True: ``d`` holds its blocks until sent) or not (False)."""
        i = seq.req_id
        p = self.prefill_of[i]
        if p < 0:
            return False
        probe = self.replicas[p].intake.seq(i, seq.arrival_s, now)  # its keys, nothing held
        tokens = self.handoff(p).reserve_return(probe, seq.num_computed)
        if tokens is None:
            self.dropped += 1
            return False
        if not tokens:
            return False
        nbytes = tokens * self.kv_bytes_per_token
        self.sent_s[i], self.nbytes[i], self.decode_of[i] = now, nbytes, d
        self.net.start(self.n + i, d, p, nbytes, now, self.latency_s)
        self.changed()
        return True

    def landed(self, done: list[int], now: float) -> list[int]:
        """Land the returns among the flows ``done`` at ``now``; the forward flows of ``done``."""
        n = self.n
        if all(flow < n for flow in done):
            return done
        for flow in done:
            if flow >= n:
                i = flow - n
                self.arrived_s[i] = now
                d, p = self.decode_of[i], self.prefill_of[i]
                self.handoff(d).release(i)
                self.replicas[d].wake_up()
                self.handoff(p).land_return(i)
                self.replicas[p].wake_up()
        return [flow for flow in done if flow < n]

    def columns(self) -> dict[str, np.ndarray]:
        """Each request's return, by request id: ``kv_return_send_s``, ``kv_return_arrive_s``
        (NaN: none) and ``kv_return_bytes`` (0: none)."""
        return {
            "kv_return_send_s": np.frombuffer(self.sent_s, dtype=np.float64).copy(),
            "kv_return_arrive_s": np.frombuffer(self.arrived_s, dtype=np.float64).copy(),
            "kv_return_bytes": np.frombuffer(self.nbytes, dtype=np.int64).copy(),
        }
