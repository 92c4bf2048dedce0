"""Progress guarantees of a run: a stall or a livelock ends it with one clear error.

A *stall*: requests remain but the scheduler can schedule nothing and nothing runs (the engine
sees an empty plan). A *livelock*: requests are preempted again and again while none finishes
and none samples a token. Without preemption every step computes at least one token that stays
computed, so a run that does not preempt cannot livelock; :class:`ProgressGuard` therefore only
counts preemptions since the last sign of progress.
"""

from __future__ import annotations

from simkv.engine.request.plan import StepPlan
from simkv.engine.scheduler import Scheduler
from simkv.metrics.recorder import Recorder

# preemptions in a row with no request finishing and no token sampled: a livelock (a legitimate
# run samples a token within a few preemptions: the request that preempted decodes or prefills on)
MAX_PREEMPTIONS_WITHOUT_PROGRESS = 10_000


class SimulationStalled(RuntimeError):
    """The run cannot end: a stall or a livelock (module docstring).

    ``str(err)`` is one line: the simulated time, the queues, the cause and the setting to change.
    """


def _queues(sched: Scheduler) -> str:
    waiting, running, swapped = sched.queue_lengths()
    return f"{waiting} waiting, {running} running, {swapped} swapped"


def stalled(start_s: float, sched: Scheduler) -> SimulationStalled:
    """The error for a step starting at ``start_s`` in which nothing can be scheduled."""
    return SimulationStalled(
        f"stalled at t={start_s:.6f} s: {_queues(sched)}, and no request can be scheduled; "
        f"{sched.stall_advice()}"
    )


class ProgressGuard:
    """Counts preemptions since a request last finished or sampled a token.

    Invariant: ``thrash`` <= :data:`MAX_PREEMPTIONS_WITHOUT_PROGRESS` while the run goes on;
    ``mark`` is (requests done, ITL rows) when the count last restarted. Progress is a step with
    decodes, a finished request or a new ITL row (a recomputed request sampling again).
    """

    def __init__(self) -> None:
        self.thrash = 0
        self.mark = (0, 0)

    def watch(self, plan: StepPlan, rec: Recorder, start_s: float, sched: Scheduler) -> None:
        """After a step (or an empty plan) that preempted or followed preemptions; raises
        :class:`SimulationStalled` past the limit."""
        mark = (rec.num_done, rec.num_itl_rows)
        if plan.decode_tokens or plan.cohort or mark != self.mark:
            self.thrash, self.mark = 0, mark
        self.thrash += plan.preempted
        if self.thrash > MAX_PREEMPTIONS_WITHOUT_PROGRESS:
            raise SimulationStalled(
                f"livelock at t={start_s:.6f} s: {self.thrash} preemptions in a row and no "
                f"request finished or sampled a token ({_queues(sched)}); give the KV cache more "
                "blocks (kv_cache.num_blocks or kv_cache.capacity_gib) or use "
                "preemption.victim: newest"
            )
