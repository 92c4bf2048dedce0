"""The decode fast path of a paged scheduler, and its whole contract.

Most engine steps of a loaded server are alike: the same running requests each decode one token
into their own blocks. A :class:`DecodeLane` advances such requests as one *cohort* (the exact
lazy state is :class:`~simkv.engine.lazy.self.DecodeCohort`), so a step costs work only for
the requests with an event in it (a new block, a filled block, a last token), not one Python
pass per running request. Frames and summaries are identical with and without the lane
(``tests/engine/test_fastforward.py``); checked runs keep it on (:meth:`sync` before checks).

Contract
--------
*Members.* The members are a prefix ``running[:size]`` of the scheduler's running list (in
admission order). Each decodes one token per step in which the lane runs. A request joins
(:meth:`extend`, after each step) while it is the next running request, decodes next, is in
step with the members (same previous-token time), is a single sequence and owns its partial
trailing block.

*Stale counters.* While a request is a member (``seq.lazy``), its ``num_computed``,
``num_output``, ``num_tokens``, ``table.length``, ``last_token_s`` (and, for content-less
requests of a by-owner hash cache, ``cached_upto``) are stored as of cohort tick
``seq.ff_tick``; the true values are the stored ones plus ``lane.tick - seq.ff_tick``. Its
``table.block_ids`` is always true. Code outside this package must not read the stale fields of
a member: call :meth:`sync` first (all members up to date, still members) or :meth:`flush`
(up to date and released). Victim keys (``simkv.engine.queues``) read them, so a scheduler
never picks a victim among members except through :meth:`plan_members`'s ``preempt_last``.

*A scheduler's step*, using the lane:

1. :meth:`plan_members` first: the members' decodes go into the plan (``plan.cohort`` of
   them, counted in its token sums but not listed in ``plan.seqs``) and each member at a block
   boundary gets its block. ``fits`` is the scheduler's word that the members can run this
   step as one block (e.g. the token budget covers them and, when victims may be taken from
   requests already scheduled, :meth:`others_fit`); ``preempt_last`` (a callback that preempts
   the last running request and returns it) lets the lane replay a block shortage exactly
   under the ``newest`` victim policy. Otherwise the lane flushes and the scheduler takes the
   step request by request, as if there were no lane. A scheduler whose decodes follow vLLM
   0.6's worst-case ``can_append_slots`` (``SchedulerBase.worst_case_decode``) gets a lane with
   ``worst_case``: a member then needs a free block to decode even inside its own block, so a
   shortage is any member finding none, boundary or not (replayed or flushed the same way).
2. The scheduler plans every non-member from ``running[plan.cohort:]`` on, as it would.
3. :meth:`complete_step` from the scheduler's ``complete``: the members advance one token;
   those that sampled their last token have left the lane (the scheduler finishes them and
   drops them from its running list); those that filled a block are returned for the prefix
   cache. Then :meth:`extend`.

*The engine's decode runs.* When every running request is a member and nothing else can
happen (the scheduler's ``decode_run`` says so), the engine
steps the lane without the scheduler: :meth:`steps_before_finish`, :meth:`plan_alone` and
:meth:`take_blocks_alone` per step, then the scheduler's ``complete_decode_run_step``, which
calls :meth:`~DecodeCohort.advance` (no member may sample its last token in a decode run).

A new paged scheduler gets the fast path by setting ``uses_lane = True`` (see
:class:`~simkv.engine.scheduler.SchedulerBase`) and calling :meth:`plan_members` first in its
``schedule``; everything else is shared.
"""

from __future__ import annotations

from collections.abc import Callable

from simkv.engine.lazy.cohort import DecodeCohort
from simkv.engine.request.plan import StepPlan
from simkv.engine.request.seq import Seq

TokensFor = Callable[[Seq, int], int]  # (running request, budget left) → tokens it would take


class DecodeLane(DecodeCohort):
    """The lazily advanced decoding prefix of a paged scheduler's running list: the exact
    lazy state (:class:`DecodeCohort`: ``size``, ``tick``, ``last_s`` …) plus the calls the
    schedulers and the engine make (the contract above). Only the calls below are for code
    outside this package."""

    __slots__ = ()

    # -- the scheduler's step ------------------------------------------------------------------
    def plan_members(
        self,
        plan: StepPlan,
        running: list[Seq],
        *,
        fits: bool,
        preempt_last: Callable[[], Seq] | None = None,
    ) -> int:
        """Put the members' decodes first in ``plan`` (contract, step 1); returns how many
        decode (0 when the lane flushed: every member is an ordinary running request again)."""
        if not self.size:
            return 0
        if fits and self.take_blocks(running, preempt_last):
            plan.add_members(self.size, self.context)
            return self.size
        self.flush(running)
        return 0

    def others_fit(self, running: list[Seq], budget: int, tokens_for: TokensFor) -> bool:
        """Whether the members and then every other running request (taking
        ``tokens_for(seq, budget left)`` tokens each) fit the token ``budget`` and the free
        blocks, so that no member can become a victim in this step. Under ``worst_case`` a
        block must stay free for the last of them too (each needs one free at its turn)."""
        if self.size > budget:
            return False
        budget -= self.size
        need, kv = self.blocks_due(), self.kv
        for seq in running[self.size :]:
            need += kv.blocks_to_allocate(seq, tokens_for(seq, budget))
        return need < kv.gpu.free_blocks if self.worst_case else need <= kv.gpu.free_blocks

    def complete_step(
        self, now: float, prev_end_s: float | None, stalled: dict[float, int], filled: list[Seq]
    ) -> tuple[int, list[Seq]]:
        """The members decoded in a step that ended at ``now`` (contract, step 3).

        Returns (members whose previous token came at ``prev_end_s``, members that sampled
        their last token: they have left the lane). Members that decoded after a stall are
        counted in ``stalled`` (previous-token time → requests); members that filled a block
        are appended to ``filled``."""
        size = self.size
        contiguous = 0
        if self.last_s == prev_end_s:
            contiguous = size
        else:
            stalled[self.last_s] = size
        ended, full = self.advance(now)
        filled.extend(full)
        return contiguous, ended

    def extend(self, running: list[Seq]) -> None:
        """Let the running requests after the members join while they can (in order)."""
        k = self.size
        while k < len(running) and self.can_join(running[k]):
            self.join(running[k])
            k += 1

    def sync(self, running: list[Seq]) -> None:
        """Bring every member's counters up to date; they stay members (for checks)."""
        touch = self.touch
        for seq in running[: self.size]:
            touch(seq)

    # -- the engine's decode runs ----------------------------------------------------------------
    def steps_before_finish(self) -> int:
        """Lane steps that can run before the one in which a member samples its last token."""
        return self.next_finish() - self.tick - 1

    def plan_alone(self, plan: StepPlan) -> None:
        """Make ``plan`` (reused from step to step) the next decode-run step's: only the
        members decode (``StepPlan.add_members`` on an empty plan, inline: once per step)."""
        size = plan.cohort = plan.decode_tokens = self.size
        plan.kv_read_tokens = self.context + size

    # give the members at a block boundary their blocks; False (nothing changed) when too few
    # are free (the decode run ends and the scheduler takes the step): take_blocks without a
    # victim callback (an alias, not a wrapper: one call per decode-run step)
    take_blocks_alone = DecodeCohort.take_blocks
