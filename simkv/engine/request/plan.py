"""What one engine step runs: the scheduled requests and the work the cost model prices."""

from __future__ import annotations

from dataclasses import dataclass

from simkv.engine.request.seq import Seq
from simkv.engine.step_work import StepWork


@dataclass(slots=True, init=False)
class StepPlan:
    """One batched forward pass.

    ``seqs[i]`` computes ``num_new[i]`` new tokens. A single new token of a request whose known
    tokens are all computed but the last sampled one is a *decode*; anything else is prefill
    (prompt chunks and recomputation). ``swap_in_blocks``/``swap_out_blocks`` are moved before
    the pass and ``copy_blocks`` are copy-on-write copies; their time adds to the step's.
    ``cohort`` more requests (the scheduler's lazily advanced decode cohort, see
    :mod:`simkv.engine.lazy`) decode one token each; they are counted in the token and
    attention sums but not listed in ``seqs``. ``queued_requests`` is the waiting queue's
    length when the step launches (the engine sets it; host cost only).
    """

    seqs: list[Seq]
    num_new: list[int]
    prefill_tokens: int
    decode_tokens: int
    attention_pairs: int
    kv_read_tokens: int
    prefill_kv_tokens: int
    swap_in_blocks: int
    swap_out_blocks: int
    copy_blocks: int
    preempted: int
    cache_hit_tokens: int
    cohort: int
    queued_requests: int

    def __init__(self) -> None:  # an empty plan (one per step: no dataclass defaults machinery)
        self.seqs = []
        self.num_new = []
        self.prefill_tokens = self.decode_tokens = self.attention_pairs = 0
        self.kv_read_tokens = self.prefill_kv_tokens = 0
        self.swap_in_blocks = self.swap_out_blocks = 0
        self.copy_blocks = self.preempted = self.cache_hit_tokens = self.cohort = 0
        self.queued_requests = 0

    def add(self, seq: Seq, num_new: int) -> None:
        """Schedule ``num_new`` tokens of ``seq`` after its ``num_computed`` cached ones."""
        cached = seq.num_computed
        self.seqs.append(seq)
        self.num_new.append(num_new)
        if num_new == 1 and seq.num_output > 0 and cached + 1 == seq.num_tokens:
            self.decode_tokens += 1
            self.kv_read_tokens += cached + 1
        else:
            self.prefill_tokens += num_new
            self.attention_pairs += num_new * cached + num_new * (num_new + 1) // 2
            self.kv_read_tokens += cached
            self.prefill_kv_tokens += cached

    def add_decode(self, seq: Seq) -> None:
        """``add(seq, 1)`` for a decode (the hot path: one call per running request per step)."""
        self.seqs.append(seq)
        self.num_new.append(1)
        self.decode_tokens += 1
        self.kv_read_tokens += seq.num_computed + 1

    def add_group_decodes(self, seq: Seq, num_seqs: int) -> None:
        """Schedule one decode token for each of ``num_seqs`` sequences of a forked ``seq``.

        The request appears ``num_seqs`` times in ``seqs`` (the batch counts sequences); the
        first entry carries ``num_new = 1`` (it advances the shared token counters once), the
        others ``num_new = 0`` (their work is added to the token and attention counts here).
        """
        self.add_decode(seq)
        extra = num_seqs - 1
        context = seq.num_computed + 1
        self.seqs.extend([seq] * extra)
        self.num_new.extend([0] * extra)
        self.decode_tokens += extra
        self.kv_read_tokens += extra * context

    def add_members(self, size: int, context: int) -> None:
        """``size`` decode-lane members decode one token each (:mod:`simkv.engine.lazy`);
        ``context`` is their summed computed tokens before the step."""
        self.cohort = size
        self.decode_tokens += size
        self.kv_read_tokens += context + size

    def remove(self, seq: Seq) -> None:
        """Unschedule ``seq`` (it was preempted after being scheduled in this step)."""
        i = self.seqs.index(seq)
        num_new = self.num_new[i]
        cached = seq.num_computed
        del self.seqs[i]
        del self.num_new[i]
        if num_new == 1 and seq.num_output > 0 and cached + 1 == seq.num_tokens:
            self.decode_tokens -= 1
            self.kv_read_tokens -= cached + 1
        else:
            self.prefill_tokens -= num_new
            self.attention_pairs -= num_new * cached + num_new * (num_new + 1) // 2
            self.kv_read_tokens -= cached
            self.prefill_kv_tokens -= cached

    @property
    def num_tokens(self) -> int:
        return self.prefill_tokens + self.decode_tokens

    @property
    def num_seqs(self) -> int:
        """Requests (sequences, for multi-sequence requests) in the batch."""
        return len(self.seqs) + self.cohort

    @property
    def empty(self) -> bool:
        return not self.seqs and not self.cohort

    def work(self) -> StepWork:
        """The step's work for the cost model."""
        return StepWork(
            prefill_tokens=self.prefill_tokens,
            decode_tokens=self.decode_tokens,
            attention_pairs=self.attention_pairs,
            kv_read_tokens=self.kv_read_tokens,
            num_seqs=len(self.seqs) + self.cohort,
            prefill_kv_tokens=self.prefill_kv_tokens,
            queued_requests=self.queued_requests,
        )
