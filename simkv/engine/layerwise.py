"""Layer-wise KV hand-overs (``link: {mode: layerwise}``): the prefill replica pushes each
layer's KV as soon as it is computed, as Mooncake's transfer engine, SGLang's P/D mode and
LMCache's layer-wise pipelining do; the decode replica reserved its blocks first (its request
reached it at routing time, :mod:`simkv.engine.disagg`).

A prefill step of duration D computes positions ``[lo, hi)`` of a request layer by layer:
layer l of L (the model's ``num_layers``) is done at ``start + (l / L) · D``, so the sendable
bytes of the step are a staircase of L steps of ``b / L`` (``b``: the step's bytes the decode
side needs). One release per layer would be L events per step and request; instead the flow's
held-back bytes are released at a steady rate of ``(L − 1) / L · b / D`` over the step (the
:class:`~simkv.engine.transfer.TransferNet` caps a flow whose backlog is empty at its release
rate) and the last layer's ``b / L`` at the step's end: two releases per step, at the step's
own start and end events. The fluid line never strays from the staircase by more than one
layer's bytes, and is exact where it matters: after the step's end, when the link kept up, one
layer's bytes remain (``bytes_per_layer / bandwidth``); when the link is the slower, the flow
is link-bound from its start either way.

Latency is the pipeline's in this mode: a flow starts moving at once and lands ``latency``
after its last byte left (:class:`~simkv.engine.disagg.Disaggregation` adds it), so a lone
hand-over lands at ``max(reserve + bytes / bw, prefill_end + bytes_per_layer / bw) +
latency``.

Positions are tracked as a high-water mark (``made``): bytes pushed before a preemption on
the prefill side stay pushed, and a recomputed position is not sent twice; positions below
the decode side's cached prefix (``skip``) are never sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from simkv.engine.request.plan import StepPlan
from simkv.engine.transfer import TransferNet
from simkv.kv.allocator import InvariantViolation

__all__ = ["LayerFeed"]


class _Ramp(NamedTuple):
    """A prefill step in progress for one request: positions ``[lo, hi)``, ``start_s`` to
    ``end_s``."""

    lo: int
    hi: int
    start_s: float
    end_s: float


class LayerFeed:
    """What the prefill replicas' steps make sendable on the flows of ``net`` (flow id =
    request id). Invariants: a flow's released bytes never exceed what its prefill has
    computed of the positions it carries (``TransferNet.release`` raises beyond what is held);
    every flow's last byte is released at the end of its request's last prefill step."""

    def __init__(
        self,
        net: TransferNet,
        kv_bytes_per_token: int,
        num_layers: int,
        changed: Callable[[], None],
    ) -> None:
        if num_layers < 1:
            raise ValueError(f"a model has at least one layer, got {num_layers}")
        self.net = net
        self.kv_bytes_per_token = kv_bytes_per_token
        self.ramp_share = (num_layers - 1) / num_layers  # released over the step
        self._changed = changed  # the transfers' next event may have moved
        self._made: dict[int, int] = {}  # positions whose KV is complete (high water)
        self._ramps: dict[int, _Ramp] = {}
        self._flows: dict[int, tuple[int, int]] = {}  # in flight: (skip, positions)

    def _bytes(self, i: int, lo: int, hi: int) -> int:
        """Bytes flow ``i`` carries of positions ``[lo, hi)``."""
        skip = self._flows[i][0]
        return self.kv_bytes_per_token * max(0, hi - max(lo, skip))

    def _rate(self, i: int, ramp: _Ramp) -> float:
        """Bytes/s released over the step (none in a step that takes no time)."""
        duration_s = ramp.end_s - ramp.start_s
        if duration_s <= 0:
            return 0.0
        return self.ramp_share * self._bytes(i, ramp.lo, ramp.hi) / duration_s

    def started(self, plan: StepPlan, start_s: float, end_s: float) -> None:
        """A prefill replica's step runs from ``start_s`` to ``end_s``."""
        if not end_s >= start_s:
            raise InvariantViolation(f"a prefill step from {start_s} s to {end_s} s")
        released = False
        for seq, num_new in zip(plan.seqs, plan.num_new, strict=True):
            i, lo = seq.req_id, seq.num_computed
            before = self._made.get(i, 0)
            made = self._made[i] = max(before, lo)  # (its prefix cached there)
            ramp = None
            if lo + num_new > made:
                ramp = self._ramps[i] = _Ramp(made, lo + num_new, start_s, end_s)
            if i in self._flows:
                rate = self._rate(i, ramp) if ramp is not None else 0.0
                nbytes = self._bytes(i, before, made)
                if nbytes or rate:
                    self.net.release(i, start_s, nbytes, rate)
                    released = True
        if released:
            self._changed()

    def ended(self, plan: StepPlan, now: float) -> None:
        """The step :meth:`started` gave ended at ``now``: every layer of it is done."""
        released = False
        for seq in plan.seqs:
            i = seq.req_id
            ramp = self._ramps.pop(i, None)
            if ramp is None:
                continue
            if ramp.end_s != now:
                raise InvariantViolation(f"request {i}'s step ends at {now} s, not {ramp.end_s}")
            made = self._made[i] = max(self._made[i], ramp.hi)
            if i in self._flows:
                skip, positions = self._flows[i]
                target = self.kv_bytes_per_token * (positions - max(made, skip))
                held = self.net.held_bytes(i, now)
                self.net.release(i, now, max(0.0, held - target))
                released = True
        if released:
            self._changed()

    def start(self, i: int, src: int, dst: int, skip: int, positions: int, now: float) -> None:
        """Start flow ``i`` (positions ``[skip, positions)`` from ``src`` to ``dst``) at
        ``now``: what the prefill computed is sendable, the rest held back."""
        self._flows[i] = (skip, positions)
        nbytes = self.kv_bytes_per_token * (positions - skip)
        sendable = float(self._bytes(i, 0, self._made.get(i, 0)))
        ramp = self._ramps.get(i)
        if ramp is not None:
            sendable += self._rate(i, ramp) * (now - ramp.start_s)
        held = min(float(nbytes), max(0.0, nbytes - sendable))
        self.net.start(i, src, dst, nbytes, now, 0.0, held_back=held)
        if ramp is not None:
            self.net.release(i, now, 0, self._rate(i, ramp))

    def finished(self, i: int) -> None:
        """Flow ``i`` ended: forget its request."""
        if i in self._ramps:
            raise InvariantViolation(f"request {i}'s KV crossed before its prefill ended")
        del self._flows[i]
        self._made.pop(i, None)
