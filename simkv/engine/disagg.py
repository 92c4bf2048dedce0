"""A fleet's prefill/decode disaggregation: which prompts go to a prefill replica, and the KV
transfers that bring them back to their decode replica.

The path of a request (vLLM's P/D serving: its ``NixlConnector`` behind a proxy, llm-d or
``disagg_proxy``; :mod:`simkv.engine.handoff` for each replica's side):

1. At arrival the fleet's router picks the serving replica among the ``mixed`` and
   ``decode`` ones (:class:`~simkv.engine.fleet.Fleet`). On a decode replica the decider
   (:mod:`simkv.config.disagg`) keeps the prompt local or sends it away; a request whose prompt
   the model rejects stays where it is rejected.
2. Sent away, the prefill router picks a prefill replica among the prefill ones (its own view
   of their loads), which runs the request as a one-token request.
3. When that finishes, its blocks are held and the request goes to its decode replica, which
   reserves blocks for the prompt beyond its own cached prefix when its scheduler reaches it
   (until then the prefill replica holds the KV: backpressure).
4. The transfer of ``tokens × model.kv_bytes_per_token`` bytes starts then, over the link
   (:mod:`simkv.engine.transfer`: a latency, then the bytes at a fair share of both
   replicas' NICs, one NIC of the link's bandwidth per GPU).
5. At its end the prefill replica frees the blocks and the decode replica runs the request:
   its first step recomputes the last prompt token and samples the first output token.

One SimPy event per change of the transfers in flight, none per token. The times of each
step of the path are kept per request (:meth:`Disaggregation.columns`).

With ``link: {mode: layerwise}`` (:mod:`simkv.engine.layerwise`) the decode replica gets the
request at routing time (step 1), so it may reserve its blocks and start the transfer before
or while the prompt is prefilled; the prefill replica's steps release the KV layer by layer,
and the transfer lands its latency after its last byte left.

With ``return_kv: true`` a finished request's KV goes back to its prefill replica
(:mod:`simkv.engine.kv_return`), over the same links.
"""

from __future__ import annotations

import math
from array import array
from functools import partial

import numpy as np

from simkv.config.fleet import DisaggregationConfig
from simkv.engine.engine import Engine, Environment
from simkv.engine.fleet_view import FleetView
from simkv.engine.flow_events import FlowEvents
from simkv.engine.handoff import Handoff
from simkv.engine.kv_return import ReturnPath
from simkv.engine.layerwise import LayerFeed
from simkv.engine.request.seq import Seq
from simkv.engine.routers import Router
from simkv.engine.transfer import TransferNet
from simkv.kv.allocator import InvariantViolation
from simkv.workload.request import Workload


class Disaggregation:
    """The P/D side of one fleet run: the decider, the prefill router and its view, the
    transfers, and each request's path (``prefill_of[i]``: its prefill replica, -1 local).

    Invariants: a request is prefilled remotely at most once; its KV is sent once, received
    once, and it runs on its decode replica only after (checked by the replicas' hand-offs)."""

    def __init__(
        self,
        cfg: DisaggregationConfig,
        env: Environment,
        replicas: list[Engine],
        roles: list[str],
        prefill_router: Router,
        prefill_view: FleetView,
        workload: Workload,
        *,
        kv_bytes_per_token: int,
        max_model_len: int,
        gpus: list[int],
        num_layers: int,
    ) -> None:
        self.cfg = cfg
        self.env = env
        self.replicas = replicas
        self.roles = roles
        self.prefill_ids = [r for r, role in enumerate(roles) if role == "prefill"]
        self.router = prefill_router
        self.view = prefill_view
        self.kv_bytes_per_token = kv_bytes_per_token
        self.max_model_len = max_model_len
        self.handoffs: list[Handoff | None] = [None] * len(replicas)  # set by the assembly
        self._prompt = workload.prompt_tokens.astype(np.int64).tolist()
        n = len(workload)
        self.prefill_of = array("q", [-1]) * n
        self.decode_of = array("q", [-1]) * n
        nan = array("d", [math.nan])
        self.handed_s = nan * n  # the prefill finished: its KV is held
        self.sent_s = nan * n  # the decode replica reserved its blocks: the transfer starts
        self.arrived_s = nan * n  # the transfer ended
        self.nbytes = array("q", bytes(8 * n))
        link = cfg.link
        self.latency_s = link.latency_s
        nics = [g * link.bandwidth_bytes_per_s for g in gpus]
        self.net = TransferNet(nics, nics)
        self.events = FlowEvents(env, self.net, self._flows_done)  # (its changed: after a start)
        self.layers: LayerFeed | None = None  # layer-wise hand-overs (else store-and-forward)
        if link.mode == "layerwise":
            self.layers = LayerFeed(self.net, kv_bytes_per_token, num_layers, self.events.changed)
        self.back: ReturnPath | None = None  # the return path (kv_return), when on
        if cfg.return_kv:
            self.back = ReturnPath(
                self.net, replicas, self._handoff, self.prefill_of,
                kv_bytes_per_token=kv_bytes_per_token, latency_s=link.latency_s,
                changed=self.events.changed,
            )  # fmt: skip

    def remote(self, i: int, r: int, now: float) -> bool:
        """Request ``i``, routed to replica ``r`` at ``now``: prefill it on a prefill
        replica (delivered there, True) or where it is served (False)."""
        if self.roles[r] != "decode" or self._prompt[i] >= self.max_model_len:
            return False
        if self.cfg.decider.keeps_local(self._prompt[i], partial(self._uncached, i, r, now)):
            return False
        k = self.router.choose(i, now, self.view)
        if not 0 <= k < self.view.size:
            raise InvariantViolation(f"prefill router chose replica {k} of {self.view.size}")
        self.view.note_routed(k, i)
        p = self.prefill_ids[k]
        self.prefill_of[i], self.decode_of[i] = p, r
        self.replicas[p].deliver(i, now)
        if self.layers is not None:  # its decode replica may reserve blocks at once
            self.replicas[r].deliver_prefilled(i, now)
        return True

    def _uncached(self, i: int, r: int, now: float) -> int:
        """Tokens of request ``i``'s prompt not in replica ``r``'s prefix cache at ``now``."""
        return self._prompt[i] - self.replicas[r].cached_prefix_tokens(i, now)

    def prefilled(self, replica: int, seq: Seq, now: float) -> None:
        """The prefill of ``seq`` finished on ``replica``: its decode replica gets it."""
        i = seq.req_id
        if self.prefill_of[i] != replica or not math.isnan(self.handed_s[i]):
            raise InvariantViolation(f"request {i} prefilled twice or on the wrong replica")
        self.handed_s[i] = now
        if self.layers is None:
            self.replicas[self.decode_of[i]].deliver_prefilled(i, seq.arrival_s)

    def reserved(self, replica: int, seq: Seq, tokens: int, now: float) -> None:
        """Decode replica ``replica`` holds blocks for ``tokens`` tokens of ``seq``: send."""
        i = seq.req_id
        if self.decode_of[i] != replica or not math.isnan(self.sent_s[i]):
            raise InvariantViolation(f"request {i} reserved twice or on the wrong replica")
        nbytes = tokens * self.kv_bytes_per_token
        self.sent_s[i], self.nbytes[i] = now, nbytes
        if self.layers is None:
            self.net.start(i, self.prefill_of[i], replica, nbytes, now, self.latency_s)
        else:
            skip = seq.num_tokens - tokens
            self.layers.start(i, self.prefill_of[i], replica, skip, seq.num_tokens, now)
        self.events.changed()

    def finished(self, replica: int, seq: Seq, now: float) -> bool:
        """Decode replica ``replica`` finished ``seq``: whether its KV goes back
        (:mod:`simkv.engine.kv_return`; its blocks are held until then)."""
        if self.back is None:
            raise InvariantViolation(f"request {seq.req_id} sends KV back without return_kv")
        return self.back.finished(replica, seq, now)

    def _flows_done(self, done: list[int], now: float) -> None:
        """The transfers of ``done`` ended (:class:`~simkv.engine.flow_events.FlowEvents`)."""
        if self.back is not None:
            done = self.back.landed(done, now)
        if self.layers is None:
            self._arrive(done, now)
        else:  # each lands its latency after its last byte left
            for i in done:
                self.layers.finished(i)
                event = self.env.timeout_at(now + self.latency_s)
                event.callbacks.append(partial(self._land, i))

    def _land(self, i: int, _event: object) -> None:
        self._arrive([i], self.env.now)

    def _arrive(self, done: list[int], now: float) -> None:
        """The transfers of ``done`` ended at ``now``: free the prefill side, run the decode."""
        for i in done:
            if math.isnan(self.handed_s[i]):
                raise InvariantViolation(f"request {i}'s KV arrived before its prefill ended")
            self.arrived_s[i] = now
            p, d = self.prefill_of[i], self.decode_of[i]
            self._handoff(p).release(i)
            self.replicas[p].wake_up()
            self._handoff(d).arrived(i)
            self.replicas[d].wake_up()

    def _handoff(self, r: int) -> Handoff:
        handoff = self.handoffs[r]
        if handoff is None:
            raise InvariantViolation(f"replica {r} hands over no KV")
        return handoff

    def columns(self) -> dict[str, np.ndarray]:
        """Each request's path, by request id: ``prefill_replica`` (-1: prefilled where it
        was served), ``kv_handoff_s`` (its prefill ended), ``kv_send_s`` (its decode replica
        reserved its blocks and the transfer began), ``kv_arrive_s``, ``kv_bytes``; with the
        return path, :meth:`ReturnPath.columns`'s too."""
        back = {} if self.back is None else self.back.columns()
        return {
            **back,
            "prefill_replica": np.frombuffer(self.prefill_of, dtype=np.int64).copy(),
            "kv_handoff_s": np.frombuffer(self.handed_s, dtype=np.float64).copy(),
            "kv_send_s": np.frombuffer(self.sent_s, dtype=np.float64).copy(),
            "kv_arrive_s": np.frombuffer(self.arrived_s, dtype=np.float64).copy(),
            "kv_bytes": np.frombuffer(self.nbytes, dtype=np.int64).copy(),
        }
