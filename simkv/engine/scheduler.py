"""The scheduler interface and the bookkeeping every scheduler shares.

A scheduler is synchronous plain Python: the engine calls :meth:`Scheduler.schedule` at the
start of a step, prices the returned plan with the cost model, advances simulated time, then
calls :meth:`Scheduler.complete`. Nothing here knows about SimPy.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import TYPE_CHECKING, Protocol

from simkv.engine.handoff import PENDING, Handoff
from simkv.engine.lazy import DecodeLane
from simkv.engine.preemption_log import PreemptionLog
from simkv.engine.queues import WaitingQueue
from simkv.engine.request.plan import StepPlan
from simkv.engine.request.seq import Seq, Status, record_done
from simkv.kv.allocator import BlockId, InvariantViolation
from simkv.kv.waste import WasteBreakdown
from simkv.metrics.recorder import Recorder, StepState

if TYPE_CHECKING:
    from simkv.engine.tiers import ReplicaTiers

_new_tuple = tuple.__new__
_NO_FORKS = (0, 0)  # fork_state of a policy without multi-sequence requests


class KVMemory(Protocol):
    """What the shared bookkeeping needs from a KV memory (paged or contiguous)."""

    def commit(self, plan: StepPlan) -> None: ...
    def free(self, seq: Seq) -> None: ...
    def breakdown(self) -> WasteBreakdown: ...
    def memory_row(self) -> tuple[int, ...]: ...
    def cached_prefix_tokens(self, probe: Callable[[], Seq]) -> int: ...


class Scheduler(Protocol):
    """One scheduling policy. Registered by its config ``kind``."""

    handoff: Handoff | None  # a prefill or decode replica's KV hand-overs (engine.handoff)
    tiers: ReplicaTiers | None  # its KV offload tiers (engine.tiers)

    def add(self, seq: Seq, now: float) -> None: ...
    def schedule(self, now: float) -> StepPlan: ...
    def complete(self, plan: StepPlan, now: float) -> None: ...
    def has_work(self) -> bool: ...
    def queue_lengths(self) -> tuple[int, int, int]: ...
    def breakdown(self) -> WasteBreakdown: ...
    def fork_state(self) -> tuple[int, int]: ...
    def step_state(self) -> StepState: ...
    def lazy_decode(self, on: bool) -> None: ...
    def decode_run(self) -> DecodeLane | None: ...
    def complete_decode_run_step(self, plan: StepPlan, now: float) -> None: ...
    def check(self) -> None: ...
    def cached_prefix_tokens(self, probe: Callable[[], Seq]) -> int: ...
    def stall_advice(self) -> str: ...
    def awaiting_kv(self) -> bool: ...
    def prefix_sources(self, probe: Callable[[], Seq]) -> dict[str, int]: ...

    @property
    def supports_forks(self) -> bool: ...


class SchedulerBase:
    """Token accounting, finishing, rejecting and inter-token latency, common to all policies.

    Subclasses keep ``self.running`` (admission order) and ``self.waiting``, implement
    ``schedule``, and call :meth:`_reject`, :meth:`_abort` and :meth:`_mark_scheduled`; a
    policy that preempts tells ``preemption_log`` (its ``preempted``, and ``resumed`` when it
    swaps a request in; :meth:`_mark_scheduled` tells it of a re-admission).
    ``supports_forks``: whether the policy runs multi-sequence requests (only vLLM v0 does);
    ``finishes_at_last_token``: whether a request leaves as soon as it samples its last token;
    ``uses_lane``: whether the policy runs the decode fast path (:mod:`simkv.engine.lazy`: a
    paged policy that calls ``self.lane.plan_members`` first in ``schedule``);
    ``worst_case_decode``: whether a decode needs a free block even when its token fits in its
    own partial block (vLLM 0.6's ``can_append_slots``; the lane must replay it).
    """

    supports_forks: bool = False
    finishes_at_last_token: bool = True  # False: _on_output_complete may defer or batch it
    uses_lane: bool = False
    worst_case_decode: bool = False

    def __init__(self, kv: KVMemory, recorder: Recorder, waiting: WaitingQueue) -> None:
        self.kv = kv
        self.recorder = recorder
        self.waiting = waiting
        self.running: list[Seq] = []
        self.swapped: Sized = ()  # requests swapped out to the CPU (a policy that swaps)
        self._prev_end_s: float | None = None  # when the last step ended
        self.fill_block_size = 0  # > 0: register the blocks each step fills (prefix caching)
        self.filled: list[Seq] = []
        self.lane: DecodeLane | None = None  # the decode fast path (paged schedulers)
        self.preemption_log = PreemptionLog(recorder)
        self.handoff: Handoff | None = None  # a prefill or decode replica's (engine.handoff)
        self.tiers: ReplicaTiers | None = None  # its KV offload tiers (engine.tiers)

    def add(self, seq: Seq, now: float) -> None:
        """A request arrived."""
        self.waiting.push(seq)

    def has_work(self) -> bool:
        return bool(self.running) or len(self.waiting) > 0

    def queue_lengths(self) -> tuple[int, int, int]:
        """(waiting, running, swapped)."""
        return len(self.waiting), len(self.running), len(self.swapped)

    def stall_advice(self) -> str:
        """Why nothing can be scheduled and the setting to change (a stall, one clause); a
        policy that knows a more precise cause overrides it."""
        return (
            "likely the waiting head (its prompt, plus its output so far after a preemption) "
            "exceeds what one step may schedule whole or what the KV cache holds: raise "
            "scheduler.max_num_batched_tokens to model.max_model_len or more, or give the KV "
            "cache more blocks"
        )

    def _mark_scheduled(self, seq: Seq, now: float) -> None:
        seq.status = Status.RUNNING
        if seq.first_scheduled_s is None:
            seq.first_scheduled_s = now
        elif seq.preemptions:  # re-admitted after a recompute preemption
            self.preemption_log.resumed(seq, now)

    def complete(self, plan: StepPlan, now: float) -> None:
        """Apply a finished step: write KV, sample tokens, finish requests, record ITL."""
        self.kv.commit(plan)
        prev_end = self._prev_end_s
        stalled: dict[float, int] = {}  # previous-token time → requests decoding after a stall
        filled = self.filled
        filled.clear()
        contiguous, ended = 0, []
        lane = self.lane
        if lane is not None and plan.cohort:  # the members: first in plan order
            contiguous, ended = lane.complete_step(now, prev_end, stalled, filled)
            for seq in ended:
                self._on_output_complete(seq, now)
        fill = self.fill_block_size
        for seq, num_new in zip(plan.seqs, plan.num_new, strict=True):
            seq.num_computed += num_new
            if fill and seq.num_computed % fill < num_new:
                filled.append(seq)
            if seq.num_computed != seq.num_tokens:
                continue  # a prefill chunk that did not reach the end of the known tokens
            seq.num_output += 1
            seq.num_tokens += 1
            last = seq.last_token_s
            if last is None:
                seq.first_token_s = now
            elif last == prev_end:
                contiguous += 1
            else:  # stalled (e.g. behind a prefill-only step): requests stalled alike share a row
                stalled[last] = stalled.get(last, 0) + 1
            seq.last_token_s = now
            if seq.num_output == seq.output_tokens:
                self._on_output_complete(seq, now)
                ended.append(seq)
        if contiguous and prev_end is not None:
            self.recorder.itl(now - prev_end, contiguous)
        if stalled:
            for last, count in stalled.items():
                self.recorder.itl(now - last, count)
        self._prev_end_s = now
        if ended:
            self._drop_ended(ended)
        if lane is not None and lane.size < len(self.running):
            lane.extend(self.running)
        if filled and fill:  # register the blocks the step filled (prefix caching)
            self.kv.prefix.cache_computed(filled)  # type: ignore[attr-defined]
        if self.preemption_log.awaiting:
            self._resumed_tokens(now)
        if self.tiers is not None:
            self.tiers.after_step(plan.seqs)

    def _resumed_tokens(self, now: float) -> None:
        """Tell the preemption log which resumed requests sampled a token in the step that
        ended at ``now`` (one that joined the decode lane since is brought up to date first)."""
        log, lane = self.preemption_log, self.lane
        if lane is not None and any(seq.lazy for seq in log.awaiting):
            lane.sync(self.running)
        log.sampled(now)

    def _drop_ended(self, ended: list[Seq]) -> None:
        """Take the requests that left from the running list."""
        running = self.running
        if self.finishes_at_last_token:
            for seq in ended:
                running.remove(seq)
        else:
            self.running = [s for s in running if s.status is Status.RUNNING]

    def decode_run(self) -> DecodeLane | None:
        """The lane, when the next steps can only be its members' decodes (every running
        request is a member and nothing waits; subclasses add their own conditions)."""
        lane = self.lane
        if lane is None or not lane.size or lane.size != len(self.running) or self.waiting:
            return None
        return lane

    def complete_decode_run_step(self, plan: StepPlan, now: float) -> None:
        """:meth:`complete` for a step of a decode run (:meth:`decode_run`) that ended at
        ``now``: only the members decoded, none sampled its last token."""
        lane = self.lane
        if lane is None:
            raise InvariantViolation("a decode-run step without a decode lane")
        self.kv.commit(plan)
        self.recorder.itl(now - lane.last_s, lane.size)
        ended, filled = lane.advance(now)
        if ended:  # (the engine stops a decode run before a member's last token)
            raise InvariantViolation("a decode run ends before its first finish")
        if filled and self.fill_block_size:
            self.kv.prefix.cache_computed(filled)  # type: ignore[attr-defined]
        self._prev_end_s = now
        if self.preemption_log.awaiting:
            self._resumed_tokens(now)

    def _on_output_complete(self, seq: Seq, now: float) -> None:
        """A request produced its last token (request-level batching overrides this)."""
        self._finish(seq, now)

    def _finish(self, seq: Seq, now: float) -> None:
        seq.status = Status.FINISHED
        seq.finish_s = now
        handoff = self.handoff
        if handoff is None or not (handoff.prefills or handoff.returns):
            self.kv.free(seq)
            record_done(self.recorder, seq)
        else:  # its blocks may be held until its KV is read (engine.handoff)
            record_done(self.recorder, seq)
            handoff.hold(seq, now)

    def _load(self, tiers: ReplicaTiers, seq: Seq, hits: list[BlockId], now: float) -> int:
        """Start loading the blocks of the waiting head ``seq`` after its HBM ``hits`` that
        ``tiers`` hold (:mod:`simkv.engine.tiers`): 1, 0 when they hold none, -1 when its
        blocks are short (admission stops, as for any request)."""
        parts = tiers.lookup(seq, len(hits))
        if not parts:
            return 0
        if not tiers.load(seq, hits, parts, now):
            return -1
        self.waiting.pop()
        return 1

    def awaiting_kv(self) -> bool:
        """Whether requests hold GPU blocks for KV in flight (a hand-over or a tier load):
        a replica that can schedule nothing then waits for the transfer instead of stalling."""
        handoff, tiers = self.handoff, self.tiers
        return (handoff is not None and handoff.pending()) or (
            tiers is not None and tiers.pending()
        )

    def elsewhere(self) -> list[Seq]:
        """Requests holding GPU blocks outside the queues: held, receiving and received
        hand-overs, tier loads."""
        handoff, tiers = self.handoff, self.tiers
        return [
            *(handoff.resident() if handoff is not None else ()),
            *(tiers.resident() if tiers is not None else ()),
        ]

    def _admit_remote(self, seq: Seq, plan: StepPlan, now: float) -> int:
        """Admit the waiting head ``seq`` whose prompt's KV comes from a prefill replica
        (:mod:`simkv.engine.handoff`): reserve its blocks and start the transfer (0), or run
        its last prompt token once the KV arrived (1, the tokens scheduled); -1 when its
        blocks are short (admission stops, as for any request)."""
        handoff = self.handoff
        if handoff is None:
            raise InvariantViolation(
                f"{seq} was prefilled elsewhere, but this replica decodes none"
            )
        if seq.remote == PENDING:
            if not handoff.reserve(seq, handoff.kv.prefix.cached_prefix(seq), now):
                return -1
            self.waiting.pop()
            return 0
        handoff.start(seq)
        self.waiting.pop()
        self.running.append(seq)
        self._mark_scheduled(seq, now)
        plan.add(seq, 1)
        return 1

    def _reject(self, seq: Seq, reason: str, now: float) -> None:
        """Never admitted (e.g. it can never fit): counted, not crashed on."""
        seq.status = Status.REJECTED
        seq.reason = reason
        seq.finish_s = now
        record_done(self.recorder, seq)

    def _abort(self, seq: Seq, reason: str, now: float) -> None:
        """Dropped after admission (e.g. no CPU swap space left, as vLLM v0 aborts)."""
        self.kv.free(seq)
        seq.status = Status.ABORTED
        seq.reason = reason
        seq.finish_s = now
        record_done(self.recorder, seq)

    def breakdown(self) -> WasteBreakdown:
        return self.kv.breakdown()

    def cached_prefix_tokens(self, probe: Callable[[], Seq]) -> int:
        """Tokens of a request's prompt in the KV memory's prefix cache, as admission would
        hit them (0 without prefix caching); ``probe`` builds the request (never admitted)."""
        return self.kv.cached_prefix_tokens(probe)

    def prefix_sources(self, probe: Callable[[], Seq]) -> dict[str, int]:
        """Tokens of a request's prompt in the prefix cache (``hbm``) and, after them, in each
        kind of KV tier, as admission would find them; ``probe`` builds the request."""
        tiers = self.tiers
        if tiers is None:
            return {"hbm": self.cached_prefix_tokens(probe)}
        return tiers.sources(probe())

    def lazy_decode(self, on: bool) -> None:
        """Run the decode fast path (:mod:`simkv.engine.lazy`) or not; only policies that
        use the lane (``uses_lane``) take it."""
        if on and self.uses_lane:
            self.lane = DecodeLane(self.kv, worst_case=self.worst_case_decode)  # type: ignore[arg-type]
        else:
            self.lane = None

    def check(self) -> None:
        """Every invariant of the KV memory, the lane's members brought up to date first."""
        if self.lane is not None:
            self.lane.sync(self.running)
        self._check()

    def _check(self) -> None:
        """The policy's own invariant checks (its KV memory's)."""

    def fork_state(self) -> tuple[int, int]:
        """(blocks held by forked multi-sequence requests, blocks they would hold unshared)."""
        return 0, 0

    def step_state(self) -> StepState:
        """What a step row records of the scheduler: :meth:`queue_lengths`, the KV memory's
        ``memory_row``, :meth:`fork_state`."""
        forks = self.fork_state() if self.supports_forks else _NO_FORKS
        # (queue_lengths, inline: one call less per step)
        queues = len(self.waiting), len(self.running), len(self.swapped)
        state = (*queues, *self.kv.memory_row(), *forks)
        return _new_tuple(StepState, state)  # StepState._make without its Python-level call
