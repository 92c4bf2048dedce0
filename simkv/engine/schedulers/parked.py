"""Async scheduling's parked requests, for the vLLM V1 scheduler.

With vLLM's async scheduling (vLLM 0.32 ``v1/core/sched/async_scheduler.py``
``AsyncScheduler`` under ``v1/engine/core.py`` ``EngineCore.step_with_batch_queue``, two
batches in flight) step n + 1 is scheduled before step n's output is processed. A request that
samples its last token in step n leaves at step n's end (its finish time) but is *parked*: it
keeps its blocks and its running slot, and is not scheduled (``Scheduler.schedule`` skips a
request whose in-flight token reaches ``max_tokens``), through step n + 1's scheduling; its
blocks are freed right after. A parked request may still be chosen as a victim: its blocks are
freed then, and it counts as preempted in that step (vLLM preempts it and drops it from the
waiting queue when its last token arrives).
"""

from __future__ import annotations

from simkv.engine.memory.paged import PagedKV
from simkv.engine.request.seq import Seq, Status, record_done
from simkv.metrics.recorder import Recorder


class Parked:
    """The requests that sampled their last token and still hold their slot and blocks."""

    __slots__ = ("_kv", "_recorder", "seqs")

    def __init__(self, kv: PagedKV, recorder: Recorder) -> None:
        self._kv = kv
        self._recorder = recorder
        self.seqs: list[Seq] = []

    def park(self, seq: Seq, now: float) -> None:
        """``seq`` finished at ``now`` (recorded); it stays in the running list. Its last
        token is never computed, so ``num_tokens`` goes back to the computed ones (nothing
        left to schedule)."""
        seq.status = Status.FINISHED
        seq.finish_s = now
        record_done(self._recorder, seq)
        seq.num_tokens -= 1
        self.seqs.append(seq)

    def release(self, running: list[Seq]) -> None:
        """Free every parked request and take it off ``running`` (its output was processed)."""
        for seq in self.seqs:
            self._kv.free(seq)
            running.remove(seq)
        self.seqs.clear()

    def preempt(self, seq: Seq) -> None:
        """A parked ``seq`` chosen as a victim (already off the running list): its blocks are
        freed now, and it does not wait (it has finished)."""
        self._kv.free(seq)
        self.seqs.remove(seq)
        seq.preemptions += 1
