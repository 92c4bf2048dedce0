"""The exact lazy state behind :class:`~simkv.engine.lazy.lane.DecodeLane` (whose docstring is
the contract schedulers rely on): running requests that decode one token per step, advanced per
event.

A paged scheduler's :class:`DecodeCohort` is a prefix ``running[:size]`` of its running list
whose members each decode one token, into their own blocks, in every step the cohort takes
part in. A member's counters (``num_computed``, ``num_output``, ``num_tokens``, ``table.length``,
``last_token_s``) are stored as of the cohort tick ``seq.ff_tick`` (``seq.lazy`` marks a
member); its true values are the stored ones plus ``tick - ff_tick`` (``last_token_s`` is the
cohort's ``last_s``). A step costs
the cohort work only for the members with an *event* at that tick, kept in calendars:

* a new block before the step, when the member's length is at a block boundary (every
  ``block_size`` ticks);
* a filled block after the step, registered in the prefix cache (with caching on; members
  without content in a hash cache that keeps them by owner are registered by count instead,
  see :meth:`DecodeCohort.advance`);
* its last token after the step, when it finishes and leaves.

Under the ``newest`` victim policy a block shortage is replayed exactly
(:meth:`DecodeCohort.take_blocks`, :mod:`simkv.engine.lazy.shortage`); anything else the lazy
state cannot express is the lane's caller's to avoid (it flushes instead). A shortage is a
member at a block boundary finding no free block or, with ``worst_case`` (vLLM 0.6's
``BlockSpaceManagerV2.can_append_slots``: every decode needs a free block, even one that writes
into its own partial block), any member finding none: then the members' blocks are handed out
member by member, as the plain pass does.
"""

from __future__ import annotations

from collections.abc import Callable

from simkv.engine.lazy.calendar import Calendar
from simkv.engine.lazy.calendar import add as _add
from simkv.engine.lazy.calendar import by_order as _order
from simkv.engine.lazy.calendar import drop as _drop
from simkv.engine.lazy.shortage import replay_short, replay_worst_case
from simkv.engine.memory.paged import PagedKV
from simkv.engine.request.seq import Seq
from simkv.kv.allocator import InvariantViolation


class DecodeCohort:
    """The lazily advanced decoding prefix of a paged scheduler's running list."""

    __slots__ = (
        "_alloc", "_fill", "_finish", "_joins", "_uncounted", "block_size", "by_owner", "caching",
        "context", "kv", "last_s", "size", "tick", "worst_case",
    )  # fmt: skip

    def __init__(self, kv: PagedKV, *, worst_case: bool = False) -> None:
        """``worst_case``: a member may decode only while a block is free (vLLM 0.6)."""
        self.kv = kv
        self.worst_case = worst_case
        self.block_size = kv.block_size
        self.caching = kv.cache is not None
        # members with private keys, in a cache that keeps them by owner, register by count
        self.by_owner = kv.cache is not None and kv.cache.by_owner
        self.size = 0  # members are running[:size]
        self.tick = 0  # cohort steps taken so far
        self.last_s = 0.0  # when every member sampled its last token
        self.context = 0  # Σ members' true num_computed
        self._joins = 0  # join stamps: members in running order have increasing stamps
        self._uncounted = 0  # members whose filled blocks are not registered by count
        self._alloc: Calendar = {}  # members needing a block before the tick's step
        self._fill: Calendar = {}  # members filling a block in it
        self._finish: Calendar = {}  # members sampling their last token in it

    def can_join(self, seq: Seq) -> bool:
        """Whether ``seq`` (the running request after the members) decodes in step with them."""
        table = seq.table
        length = table.length
        return (
            seq.group is None
            and seq.num_output > 0
            and seq.num_tokens - seq.num_computed == 1
            and (self.size == 0 or seq.last_token_s == self.last_s)
            and (length % self.block_size == 0 or self.kv.refcounts[table.block_ids[-1]] == 1)
        )

    def join(self, seq: Seq) -> None:
        """Make ``seq`` (exact, eligible per :meth:`can_join`) the last member."""
        bs, tick, length = self.block_size, self.tick, seq.num_computed
        if self.size == 0:
            if seq.last_token_s is None:
                raise InvariantViolation(f"{seq} joins the decode lane before its first token")
            self.last_s = seq.last_token_s
        seq.ff_tick = tick
        seq.lazy = True
        seq.order = self._joins
        self._joins += 1
        end = seq.end_tick = tick + seq.output_tokens - seq.num_output  # its last token's
        _add(self._finish, end, seq)
        first = tick + (-length) % bs + 1  # the first step starting at a block boundary
        if first <= end:
            _add(self._alloc, first, seq)
        if self.by_owner and not self._counted(seq):
            self._uncounted += 1
        if self.caching and seq.keys is not None and not self._counted(seq):
            fill = tick + ((-length) % bs or bs)
            if fill < end:  # a block filled by the last step is registered when it is freed
                _add(self._fill, fill, seq)
        self.context += length
        self.size += 1

    def _counted(self, seq: Seq) -> bool:
        """Whether ``seq``'s filled blocks are registered by count (:meth:`advance`)."""
        return self.by_owner and seq.keys is not None and seq.keys.owner is not None

    def touch(self, seq: Seq) -> None:
        """Bring one member's stored counters up to the current tick."""
        d = self.tick - seq.ff_tick
        if d:
            seq.num_computed += d
            seq.num_output += d
            seq.num_tokens += d
            seq.table.length += d
            seq.ff_tick = self.tick
            if self.by_owner and seq.keys is not None and seq.keys.owner is not None:
                # blocks counted as they filled (advance); a block its last step filled is
                # not (it is registered when the request frees its blocks)
                last = seq.num_output == seq.output_tokens
                seq.cached_upto = (seq.num_computed - last) // self.block_size
        seq.last_token_s = self.last_s

    def flush(self, running: list[Seq]) -> None:
        """Bring every member up to date and dissolve the cohort (they rejoin later)."""
        for seq in running[: self.size]:
            self.touch(seq)
            seq.lazy = False
        self.size = 0
        self._uncounted = 0
        self.context = 0
        self._alloc.clear()
        self._fill.clear()
        self._finish.clear()

    def next_finish(self) -> int:
        """The earliest tick at which a member samples its last token; far away when there is
        no member."""
        return min(self._finish, default=self.tick + (1 << 62))

    def blocks_due(self) -> int:
        """Blocks the members need before the next step."""
        due = self._alloc.get(self.tick + 1)
        return 0 if due is None else len(due)

    def leave(self, seq: Seq) -> None:
        """A member sampled its last token (it has no event left): up to date, out."""
        self.touch(seq)
        seq.lazy = False
        if self.by_owner and not self._counted(seq):
            self._uncounted -= 1
        self.context -= seq.num_computed
        self.size -= 1

    def book_block(self, tick: int, seq: Seq) -> None:
        """A member needs a new block before tick ``tick``'s step."""
        _add(self._alloc, tick, seq)

    def preempted(self, seq: Seq) -> None:
        """A member is preempted while the next step's blocks are handed out: its remaining
        events are dropped (a block for the next step is skipped by the caller)."""
        self.touch(seq)
        bs, tick, length = self.block_size, self.tick, seq.num_computed
        end = tick + seq.output_tokens - seq.num_output
        _drop(self._finish, end, seq)
        first = tick + (-length) % bs + 1
        if tick + 1 < first <= end:
            _drop(self._alloc, first, seq)
        if self.caching and seq.keys is not None and not self._counted(seq):
            fill = tick + ((-length) % bs or bs)
            if fill < end:
                _drop(self._fill, fill, seq)
        if self.by_owner and not self._counted(seq):
            self._uncounted -= 1
        seq.lazy = False
        self.context -= length
        self.size -= 1

    def take_blocks(
        self, running: list[Seq] | None = None, preempt_last: Callable[[], Seq] | None = None
    ) -> bool:
        """Give each member at a block boundary its block for the next step, in running order.

        With too few free blocks (under ``worst_case``: unless a block stays free for every
        member, boundary or not): without ``preempt_last``, return False with nothing changed;
        with it, do what the step-by-step pass does under the ``newest`` victim policy — while
        no block is free, preempt the last running request (``preempt_last`` removes and
        preempts ``running[-1]`` and returns it; a member leaves the cohort first), until the
        block fits or the member itself was the victim.
        """
        tick = self.tick + 1
        due = self._alloc.pop(tick, None)
        if due is None:
            if not self.worst_case or self.kv.gpu.free_blocks:
                return True
            due = []  # worst case: the first member finds no free block
        kv, gpu = self.kv, self.kv.gpu
        nxt = tick + self.block_size
        alloc = self._alloc
        # worst case, the last member needs a block still free after the others took theirs
        if len(due) < gpu.free_blocks or (len(due) == gpu.free_blocks and not self.worst_case):
            # the common case: every member's block is free. Which member gets which of the
            # blocks popped together does not matter (they are alike: free, uncached), so
            # running order is not needed here.
            last = kv.grow_decodes(due, gpu.alloc_many(len(due)))
            again = [seq for seq in due if nxt <= seq.end_tick] if last else due
            if again:
                later = alloc.get(nxt)
                if later is None:
                    alloc[nxt] = again
                else:
                    later.extend(again)
            return True
        if preempt_last is None or running is None:
            if due:
                self._alloc[tick] = due
            return False
        if self.worst_case:
            replay_worst_case(self, due, nxt, running, preempt_last)
        else:
            replay_short(self, due, nxt, running, preempt_last)
        return True

    def advance(self, now: float) -> tuple[list[Seq], list[Seq]]:
        """The members decoded one token each in a step that ended at ``now``.

        Returns the members that sampled their last token and those that filled a block, both
        in running order and up to date; the finished ones have left the cohort (the caller
        finishes them and drops them from its running list).
        """
        self.tick += 1
        tick = self.tick
        self.context += self.size
        self.last_s = now
        done = self._finish.pop(tick, None)
        if done is None:
            done = []
        else:
            if len(done) > 1:
                done.sort(key=_order)
            for seq in done:
                self.leave(seq)
        if self.by_owner:
            # a counted member fills a block in this step exactly when its next step starts at
            # a block boundary (it has an entry in the next tick's block calendar)
            due = self._alloc.get(tick + 1)
            if due:
                n = len(due) if not self._uncounted else sum(map(self._counted, due))
                self.kv.cache.owned_filled(n)  # type: ignore[union-attr]
        filled = self._fill.pop(tick, None)
        if filled is None:
            return done, []
        if len(filled) > 1:
            filled.sort(key=_order)
        nxt = tick + self.block_size
        fill = self._fill
        for seq in filled:
            self.touch(seq)
            if nxt < seq.end_tick:
                _add(fill, nxt, seq)
        return done, filled
