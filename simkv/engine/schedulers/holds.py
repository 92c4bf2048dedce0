"""What-if victims of the V1 scheduler, held until the request they gave way to has run.

vLLM has only ``newest`` (FCFS) and ``lowest_priority`` (priority policy) victims; ``oldest``,
``longest`` and ``fewest_blocks`` are simkv what-if policies. Under them a preempted request
could be re-admitted, evict its evictor, and so on forever (with chunked prefill, two requests
each holding half the memory take turns recomputing and neither samples a token). So a request
a what-if policy preempts is *held*: it is not re-admitted while the request it gave way to (the
one whose allocation failed, or the oldest other running request when it gave way to itself)
is still running. Until then admission stops (the held request is the waiting head), so the
running set only shrinks until a request finishes: no livelock.
"""

from __future__ import annotations

from simkv.engine.request.seq import Seq, Status


class Holds:
    """Held victims → the request each gave way to (empty: nothing held, the usual case)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[Seq, Seq] = {}

    def __bool__(self) -> bool:
        return bool(self._held)

    def hold(self, victim: Seq, seq: Seq, running: list[Seq]) -> None:
        """Keep ``victim`` (preempted for ``seq``'s allocation) out until the request it gave
        way to leaves ``running``."""
        if victim is not seq:
            self._held[victim] = seq
        elif running:
            self._held[victim] = running[0]

    def still_held(self, seq: Seq) -> bool:
        """Whether the waiting head ``seq`` must stay out."""
        held = self._held
        if seq not in held:
            return False
        if held[seq].status is Status.RUNNING:
            return True
        del held[seq]
        return False
