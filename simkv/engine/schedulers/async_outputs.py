"""What vLLM's async scheduling changes for the V1 scheduler: outputs processed a step late.

With async scheduling (vLLM 0.32 ``v1/core/sched/async_scheduler.py`` ``AsyncScheduler`` under
``v1/engine/core.py`` ``EngineCore.step_with_batch_queue``, two batches in flight) step n + 1
is scheduled before step n's output is processed (``Scheduler.update_from_output``, right
after step n + 1's ``schedule()``). Two consequences:

* **Finished requests are parked.** A request that samples its last token in step n leaves
  at step n's end (its finish time) but keeps its blocks and its running slot, and is not
  scheduled (``Scheduler.schedule`` skips a request whose in-flight token reaches
  ``max_tokens``), through step n + 1's scheduling; it is freed right after. It may still be
  chosen as a victim: its blocks are freed then, and it counts as preempted in that step
  (vLLM preempts it and drops it from the waiting queue when its last token arrives).
* **Blocks are cached a step later.** vLLM caches a block once the tokens at all its
  positions are known (``KVCacheManager.allocate_slots`` caches up to ``min(computed + new,
  num_tokens)``; ``update_from_output`` up to the computed tokens), and a token sampled in
  step n is known only after step n + 1's scheduling. So a block filled in step n is cached
  after step n + 1's scheduling (at its allocation there when the request is scheduled, else
  when the output is processed), not at all when the request is preempted there (a stale
  output caches nothing), and a preempted request's blocks are cached no further when freed.
"""

from __future__ import annotations

from simkv.engine.memory.paged import PagedKV
from simkv.engine.request.seq import Seq, Status, record_done
from simkv.metrics.recorder import Recorder


class AsyncOutputs:
    """Parked requests and the lagging prefix-cache registration of one V1 scheduler; it
    takes over the KV memory's registration (at allocation and at free)."""

    __slots__ = ("_kv", "_recorder", "parked")

    def __init__(self, kv: PagedKV, recorder: Recorder) -> None:
        kv.cache_on_alloc = False  # registration follows the outputs (the module docstring)
        kv.register_on_free = False
        self._kv = kv
        self._recorder = recorder
        self.parked: list[Seq] = []

    def park(self, seq: Seq, now: float) -> None:
        """``seq`` finished at ``now`` (recorded); it stays in the running list. Its last
        token is never computed, so ``num_tokens`` goes back to the computed ones (nothing
        left to schedule)."""
        seq.status = Status.FINISHED
        seq.finish_s = now
        record_done(self._recorder, seq)
        seq.num_tokens -= 1
        self.parked.append(seq)

    def allocated(self, seq: Seq, in_flight_s: float | None) -> None:
        """``seq`` got its slots in this schedule: cache its blocks full of known tokens (a
        token sampled in the step that ended at ``in_flight_s`` is not known yet; None: every
        output was processed)."""
        known = seq.num_tokens - (seq.last_token_s == in_flight_s)
        self._kv.prefix.register(seq, min(seq.table.length, known))

    def processed(self, running: list[Seq]) -> None:
        """The outputs in flight were processed (after a schedule): running requests cache
        their blocks full of computed tokens; the parked ones too, and leave ``running``."""
        prefix = self._kv.prefix
        for seq in running:
            if seq.status is Status.RUNNING:
                prefix.register(seq, seq.num_computed)
        for seq in self.parked:
            prefix.register(seq, seq.num_computed)
            self._kv.free(seq)
            running.remove(seq)
        self.parked.clear()

    def preempt(self, seq: Seq) -> None:
        """A parked ``seq`` chosen as a victim (already off the running list): its blocks are
        freed now, and it does not wait (it has finished)."""
        self._kv.free(seq)
        self.parked.remove(seq)
        seq.preemptions += 1
