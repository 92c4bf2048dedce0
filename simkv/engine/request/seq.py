"""Per-request mutable state inside one simulation run.

A :class:`Seq` is created when its request arrives and is owned by exactly one scheduler queue at
a time. Token accounting follows vLLM's: ``num_tokens == prompt_tokens + num_output`` (an
attribute kept in step by ``SchedulerBase.complete``) are the tokens known so far;
``num_computed`` of them have KV in the cache. A step that brings ``num_computed`` up to
``num_tokens`` samples one new token. The last sampled token's KV is never written, so a finished
request held at most ``prompt_tokens + output_tokens - 1`` slots.
"""

from __future__ import annotations

from enum import StrEnum

from simkv.engine.request.fork_group import ForkGroup
from simkv.kv.allocator import InvariantViolation
from simkv.kv.block_table import SequenceTable
from simkv.metrics.recorder import Recorder
from simkv.workload.content import KeyStream, UniqueKeys


class Status(StrEnum):
    """Where a request is; the terminal ones end up in the per-request frame."""

    WAITING = "waiting"
    RUNNING = "running"
    SWAPPED = "swapped"
    FINISHED = "finished"
    REJECTED = "rejected"
    ABORTED = "aborted"


class Seq:
    """One request's state. Times are simulated seconds; ``None`` means "not yet".

    Invariants: ``0 <= num_computed <= num_tokens``; ``num_output <= output_tokens``;
    ``table.length == num_computed`` while the request's KV is on the GPU (paged schedulers).
    ``group`` (None = one sequence) makes it a multi-sequence request; once its group has forked,
    ``table`` is empty and the KV lives in ``group.tables`` (see :mod:`simkv.engine.memory.forks`).
    """

    __slots__ = (
        "arrival_s",
        "cache_hit_tokens",
        "cached_upto",
        "end_tick",
        "ff_tick",
        "final_kv_tokens",
        "finish_s",
        "first_scheduled_s",
        "first_token_s",
        "group",
        "keys",
        "last_token_s",
        "lazy",
        "num_computed",
        "num_output",
        "num_tokens",
        "order",
        "output_tokens",
        "preemptions",
        "prefix_hit_tokens",
        "priority",
        "prompt_tokens",
        "reason",
        "recomputed_tokens",
        "remote",
        "req_id",
        "reserved_slots",
        "status",
        "stored_upto",
        "swapped_bytes",
        "swaps",
        "table",
        "truncated",
    )

    def __init__(
        self,
        req_id: int,
        arrival_s: float,
        prompt_tokens: int,
        output_tokens: int,
        priority: int,
        block_size: int,
        truncated: bool = False,
    ) -> None:
        self.req_id = req_id
        self.arrival_s = arrival_s
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.priority = priority
        self.truncated = truncated
        self.final_kv_tokens = prompt_tokens + output_tokens - 1
        self.num_computed = 0
        self.num_output = 0
        self.num_tokens = prompt_tokens  # prompt + generated; kept in step with num_output
        self.status = Status.WAITING
        self.reason = ""
        self.table = SequenceTable.empty(block_size)
        self.reserved_slots = 0
        self.first_scheduled_s: float | None = None
        self.first_token_s: float | None = None
        self.last_token_s: float | None = None
        self.finish_s: float | None = None
        self.preemptions = 0
        self.swaps = 0
        self.swapped_bytes = 0
        self.recomputed_tokens = 0
        self.keys: KeyStream | UniqueKeys | None = None  # content keys, when prefix caching is on
        self.cached_upto = 0  # leading blocks registered in the prefix cache
        self.stored_upto = 0  # leading blocks stored in the KV tiers (simkv.engine.tiers)
        self.prefix_hit_tokens: int | None = None  # cache hits at the first admission
        self.cache_hit_tokens = 0  # cache hits over every admission (incl. after preemption)
        self.group: ForkGroup | None = None  # sequences of a multi-sequence request
        self.lazy = False  # a decode-lane member (simkv.engine.lazy)
        self.ff_tick = 0  # the cohort tick its counters are stored as of, while lazy
        # end_tick (set when it joins a cohort): the cohort tick of its last token, while lazy
        self.order = 0  # cohort join stamp (running order among members)
        self.remote = 0  # its prompt's KV comes from a prefill replica (simkv.engine.handoff)

    def __repr__(self) -> str:
        return (
            f"Seq({self.req_id}, {self.status}, computed={self.num_computed}, "
            f"out={self.num_output}/{self.output_tokens})"
        )


def group_of(seq: Seq) -> ForkGroup:
    """``seq``'s group; raises :class:`InvariantViolation` for a single-sequence request."""
    group = seq.group
    if group is None:
        raise InvariantViolation(f"{seq} is not a multi-sequence request")
    return group


def is_forked(seq: Seq) -> bool:
    """Whether ``seq`` currently holds several sequences (its KV lives in ``group.tables``)."""
    return seq.group is not None and bool(seq.group.tables)


def tables_of(seq: Seq) -> list[SequenceTable]:
    """Every table holding ``seq``'s KV (one, or the group's after the fork)."""
    if seq.group is not None and seq.group.tables:
        return seq.group.tables
    return [seq.table]


_STATUS_TEXT = {status: status.value for status in Status}  # plain strings (faster than .value)


def record_done(recorder: Recorder, seq: Seq) -> None:
    """Hand a request that left the system (finished, rejected or aborted) to the recorder."""
    group = seq.group
    generated = seq.num_output if group is None else group.generated_tokens(seq.num_output)
    recorder.request_done(  # in request_done's parameter order (positional: no kwargs cost)
        seq.req_id, seq.arrival_s, seq.first_scheduled_s, seq.first_token_s, seq.finish_s,
        seq.prompt_tokens, seq.output_tokens, generated, 1 if group is None else group.n,
        seq.truncated, seq.priority, seq.preemptions, seq.swaps, seq.swapped_bytes,
        seq.recomputed_tokens, seq.prefix_hit_tokens or 0, seq.cache_hit_tokens,
        _STATUS_TEXT[seq.status], seq.reason,
    )  # fmt: skip
