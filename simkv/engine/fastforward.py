"""Fast-forward of decode-only stretches: many engine steps without per-request work per step.

When every running request of a ``vllm_v1`` batch is decoding into its own sequence, nothing is
waiting and no request finishes soon, the next steps are predictable: each of the ``B`` running
requests computes one token per step, step ``k`` (1-based) of the window attends over ``P0 +
B(k - 1)`` context tokens, and block events are sparse — request ``i`` with ``L_i`` computed
tokens needs a new block before step ``k`` when ``(L_i + k - 1) % block_size == 0`` and fills one
after step ``k`` when ``(L_i + k) % block_size == 0``. A :class:`DecodeWindow` applies exactly those
events, in the order the step-by-step engine would (step by step; within a step, in running
order), and leaves every per-request counter to :meth:`DecodeWindow.close`. Frames, summaries and
cache decisions are identical to stepping one by one (``tests/engine/test_fastforward.py`` checks
this on random configs); the engine still yields one SimPy timeout per step, so simulated times
are the same floats.

The window never holds a preemption (it allocates no more blocks than are free when it opens)
and ends before any request's last token and at the first step after which a request arrived.
"""

from __future__ import annotations

from simkv.engine.cost_model import StepWork
from simkv.engine.paged_kv import PagedKV
from simkv.engine.plan import StepPlan
from simkv.engine.sequence import Seq
from simkv.metrics.recorder import Recorder

MIN_STEPS = 4  # shorter stretches are cheaper step by step


class DecodeWindow:
    """Up to ``max_steps`` decode-only steps of ``running`` (a vllm_v1 batch), applied lazily."""

    def __init__(self, running: list[Seq], kv: PagedKV, recorder: Recorder, max_steps: int) -> None:
        self.running = running
        self.kv = kv
        self.recorder = recorder
        self.max_steps = max_steps
        self.start_tokens = [seq.num_computed for seq in running]
        batch = len(running)
        context = sum(self.start_tokens) + batch
        self._context0 = context
        self.plan = StepPlan(seqs=running, decode_tokens=batch)  # what each step's row reports
        self._allocs, self._fills = self._events(max_steps)

    def _events(self, steps: int) -> tuple[list[list[int]], list[list[int]]]:
        """Per step: the requests (running order) needing a block before it / filling one after."""
        bs = self.kv.block_size
        allocs: list[list[int]] = [[] for _ in range(steps + 1)]
        fills: list[list[int]] = [[] for _ in range(steps + 1)]
        caching = self.kv.cache is not None
        for i, length in enumerate(self.start_tokens):
            for k in range((-length) % bs + 1, steps + 1, bs):
                allocs[k].append(i)
            if caching and self.running[i].keys is not None:
                for k in range((-length) % bs or bs, steps + 1, bs):
                    fills[k].append(i)
        return allocs, fills

    @staticmethod
    def blocks_needed(running: list[Seq], block_size: int, steps: int) -> int:
        """New blocks ``steps`` decode steps of ``running`` allocate."""
        total = 0
        for seq in running:
            length = seq.num_computed
            total += -(-(length + steps) // block_size) - (-(-length // block_size))
        return total

    def work(self, k: int) -> StepWork:
        """What step ``k`` computes (the same integers the step-by-step plan would hold)."""
        batch = len(self.running)
        context = self._context0 + batch * (k - 1)
        return StepWork(
            prefill_tokens=0, decode_tokens=batch, attention_pairs=context,
            kv_read_tokens=context, num_seqs=batch,
        )  # fmt: skip

    def before_step(self, k: int) -> None:
        """Take the blocks step ``k`` writes into (tables grow at their block boundary)."""
        for i in self._allocs[k]:
            seq = self.running[i]
            seq.table.length = self.start_tokens[i] + k - 1
            ok = self.kv.allocate_slots(seq, 1)
            assert ok, "the window holds no more allocations than free blocks"

    def after_step(self, k: int, now: float, prev_end: float) -> None:
        """Step ``k`` ended at ``now``: KV written, full blocks cached, one shared ITL gap."""
        batch = len(self.running)
        self.kv.written_tokens += batch
        if self._fills[k]:
            filled = []
            for i in self._fills[k]:
                seq = self.running[i]
                seq.num_computed = self.start_tokens[i] + k
                filled.append(seq)
            self.kv.cache_computed(filled)
        self.recorder.itl(now - prev_end, batch)

    def close(self, steps: int, now: float) -> None:
        """Bring every request to the state ``steps`` steps later (tokens, lengths, times)."""
        for seq, start in zip(self.running, self.start_tokens, strict=True):
            seq.num_computed = start + steps
            seq.table.length = start + steps
            seq.num_output += steps
            seq.num_tokens += steps
            seq.last_token_s = now


def open_window(
    running: list[Seq], kv: PagedKV, recorder: Recorder, prev_end: float | None,
    max_steps: int = 4096,
) -> DecodeWindow | None:  # fmt: skip
    """A window over ``running`` if every request decodes in step with the last step (ended at
    ``prev_end``), none finishes within ``MIN_STEPS`` steps and the blocks the window takes are
    free (no preemption); the caller has checked that nothing else could be scheduled."""
    if not running or prev_end is None:
        return None
    steps = max_steps
    for seq in running:
        if seq.last_token_s != prev_end or seq.num_tokens - seq.num_computed != 1:
            return None
        steps = min(steps, seq.output_tokens - seq.num_output - 1)
        if steps < MIN_STEPS:
            return None
    bs, free = kv.block_size, kv.gpu.free_blocks
    while steps >= MIN_STEPS and DecodeWindow.blocks_needed(running, bs, steps) > free:
        steps //= 2
    return DecodeWindow(running, kv, recorder, steps) if steps >= MIN_STEPS else None
