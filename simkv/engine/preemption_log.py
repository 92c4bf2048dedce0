"""When each preemption happened and ended: the recorder's ``preemptions`` rows, kept by the
scheduler that preempts (:class:`~simkv.engine.scheduler.SchedulerBase` owns one).

A preempted request is *out* from its preemption until it is scheduled again (re-admitted
after a recompute preemption, swapped in after a swap), then *awaiting* until it samples its
next token (the end of its recompute prefill, or of the step it was swapped in and decoded).
The recorder's row gets the three times: :meth:`PreemptionLog.preempted`,
:meth:`~PreemptionLog.resumed`, :meth:`~PreemptionLog.sampled`.

Cost: nothing per token. A scheduler calls ``preempted`` and ``resumed`` where it preempts and
re-admits or swaps in (once per preemption), and ``sampled`` after a step only while
``awaiting`` is not empty, so a run without preemptions pays one truth test per step.
"""

from __future__ import annotations

from simkv.engine.request.seq import Seq
from simkv.kv.allocator import InvariantViolation
from simkv.metrics.recorder import Recorder


class PreemptionLog:
    """The preempted requests of one scheduler and their rows in its recorder.

    Invariants: a request is in ``out`` from its preemption until :meth:`resumed`, then in
    ``awaiting`` (its row and its ``num_output`` then) until a step in which it sampled a
    token, or its next preemption; never in both. A request that never comes back (aborted
    while out, or the run ended) stays in ``out``, its row's later times NaN.
    """

    __slots__ = ("_out", "_recorder", "awaiting")

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._out: dict[Seq, int] = {}  # preempted, not scheduled since → its row
        self.awaiting: dict[Seq, tuple[int, int]] = {}  # resumed → (row, num_output then)

    def preempted(self, seq: Seq, now: float, swap: bool) -> None:
        """``seq`` was preempted at ``now`` (swapped out if ``swap``, else to recompute)."""
        self.awaiting.pop(seq, None)  # preempted again before its next token
        self._out[seq] = self._recorder.preemption(now, seq.req_id, swap)

    def resumed(self, seq: Seq, now: float) -> None:
        """``seq``, preempted, was scheduled again at ``now`` (re-admitted or swapped in)."""
        row = self._out.pop(seq, None)
        if row is None:
            raise InvariantViolation(f"{seq} was scheduled again but never preempted")
        self._recorder.resumed(row, now)
        self.awaiting[seq] = (row, seq.num_output)

    def sampled(self, now: float) -> None:
        """A step ended at ``now``: the awaiting requests that sampled a token in it did so
        at ``now`` (called while :attr:`awaiting` is not empty, their counters true: a
        resumed request may join the decode lane before its next token, so the scheduler
        syncs the lane first)."""
        for seq, (row, before) in list(self.awaiting.items()):
            if seq.num_output > before:
                self._recorder.next_token(row, now)
                del self.awaiting[seq]
