"""Multi-sequence requests (vLLM 0.6's ``SequenceGroup``): parallel sampling, tree of thought,
beam search, on the paged KV memory.

A request with a :class:`ForkGroup` runs as one sequence (its ``Seq.table``) until it has
sampled ``fork_after + 1`` output tokens; right after that step it forks (``fork_sequence``,
lazy copy-on-write) into ``n`` sequences held in ``group.tables``, and its own ``Seq.table`` is
left empty. Output lengths are fixed per request, so the sequences of a group always have the
same length: they decode in lock-step (one token each per decode step) and finish together, and
the request's token counters (``num_computed``, ``num_output``, ...) describe every sequence.
Beam groups re-draw their beams after every decode step (:func:`reshuffle_beams`).

KV accounting of a forked group (kept in ``PagedKV``'s running sums; :func:`group_sums`):
``written`` = Σ over its tables of ``num_computed``; ``dup`` = computed tokens in shared blocks
counted once per extra reference (so ``written - dup`` counts a shared block once);
``internal`` = never-written slots past the final length, once per distinct trailing block.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from simkv.engine.plan import StepPlan
from simkv.kv.allocator import InvariantViolation
from simkv.kv.block_table import SequenceTable, fork_sequence
from simkv.kv.waste import unwritten_slots

if TYPE_CHECKING:
    from simkv.engine.paged_kv import PagedKV
    from simkv.engine.sequence import Seq


def group_of(seq: Seq) -> ForkGroup:
    """``seq``'s group; raises :class:`InvariantViolation` for a single-sequence request."""
    group = seq.group
    if group is None:
        raise InvariantViolation(f"{seq} is not a multi-sequence request")
    return group


class ForkGroup:
    """The fan-out of one request.

    Invariants: ``n >= 2``; ``fork_after >= 0`` output tokens before the fork (0 = the prompt's
    sampling step already yields ``n`` tokens); ``beam`` implies ``fork_after == 0``. ``tables``
    is empty before the fork and holds one table per live sequence after it (``n`` of them),
    all of the request's ``num_computed`` length whenever a step is not in flight.
    """

    __slots__ = ("beam", "fork_after", "n", "shared", "tables", "usage")

    def __init__(self, n: int, fork_after: int, beam: bool) -> None:
        if n < 2 or fork_after < 0 or (beam and fork_after):
            raise ValueError(f"bad fork group: n={n}, fork_after={fork_after}, beam={beam}")
        self.n = n
        self.fork_after = fork_after
        self.beam = beam
        self.tables: list[SequenceTable] = []
        self.usage = (0, 0)  # (distinct blocks, blocks if unshared) as of the last change
        self.shared = 0  # leading blocks common to all tables at the last change (a hint)

    def generated_tokens(self, num_output: int) -> int:
        """Tokens sampled over all sequences when each has ``num_output`` output tokens."""
        if num_output <= self.fork_after:
            return num_output
        return self.fork_after + self.n * (num_output - self.fork_after)


def is_forked(seq: Seq) -> bool:
    """Whether ``seq`` currently holds several sequences (its KV lives in ``group.tables``)."""
    return seq.group is not None and bool(seq.group.tables)


def tables_of(seq: Seq) -> list[SequenceTable]:
    """Every table holding ``seq``'s KV (one, or the group's after the fork)."""
    if seq.group is not None and seq.group.tables:
        return seq.group.tables
    return [seq.table]


def shared_prefix_blocks(tables: list[SequenceTable], hint: int = 0) -> int:
    """How many leading block ids every table has in common (the forked prompt, mostly).

    ``hint`` (a previous answer for the same group) is checked with one list-slice comparison
    per table (in C) and extended block by block over the tails; when it no longer holds, the
    answer is bisected with slice comparisons. Either way the exact common prefix, without a
    Python loop over a long prompt's blocks."""
    first, others = tables[0].block_ids, tables[1:]
    top = min(len(table.block_ids) for table in tables)
    lo = min(hint, top)
    head = first[:lo]
    if not all(table.block_ids[:lo] == head for table in others):
        lo, hi = 0, lo - 1  # the common prefix is now shorter than the hint
        while lo < hi:
            mid = (lo + hi + 1) // 2
            head = first[:mid]
            if all(table.block_ids[:mid] == head for table in others):
                lo = mid
            else:
                hi = mid - 1
        return lo
    while lo < top and all(table.block_ids[lo] == first[lo] for table in others):
        lo += 1
    return lo


def group_sums(
    tables: list[SequenceTable], num_computed: int, final_kv_tokens: int, block_size: int,
    shared: int | None = None,
) -> tuple[int, int, int]:  # fmt: skip
    """``(written, internal, dup)`` token/slot counts of one request's tables (module doc).

    A block sits at the same index in every table that holds it (sharing is positional: forks
    and copy-on-write), so the ``shared`` leading blocks common to all tables are counted in
    closed form and only the tables' tails are walked; this keeps a step of a beam group with a
    long prompt O(tail) instead of O(prompt) (the sums are identical to a walk over all ids).
    ``shared``: :func:`shared_prefix_blocks` of ``tables`` if known.
    """
    if shared is None:
        shared = shared_prefix_blocks(tables)
    n = len(tables)
    dup = (n - 1) * min(num_computed, shared * block_size)  # each shared block's tokens, n - 1x
    refs: Counter[int] = Counter()
    first_index: dict[int, int] = {}
    trailing: set[int] = set()
    for table in tables:
        ids = table.block_ids
        tail = ids[shared:]
        refs.update(tail)
        for j, block in enumerate(tail, shared):
            first_index.setdefault(block, j)
        if ids:
            trailing.add(ids[-1])
    if shared:
        first_index[tables[0].block_ids[shared - 1]] = shared - 1  # a trailing shared block
    for block, count in refs.items():
        if count > 1:
            filled = min(block_size, max(0, num_computed - first_index[block] * block_size))
            dup += (count - 1) * filled
    internal = 0
    for block in trailing:
        internal += unwritten_slots(first_index[block] + 1, block_size, final_kv_tokens)
    return n * num_computed, internal, dup


def _account(kv: PagedKV, seq: Seq, sign: int) -> None:
    """Add (``sign`` 1) or remove (-1) ``seq``'s share of ``kv``'s running sums.

    Called around every change of a group's blocks, so it also refreshes ``group.usage``.
    """
    tables, group = tables_of(seq), seq.group
    shared = None
    if group is not None and group.tables:
        shared = group.shared = shared_prefix_blocks(tables, group.shared)
    written, internal, dup = group_sums(
        tables, seq.num_computed, seq.final_kv_tokens, kv.block_size, shared
    )
    kv.written_tokens += sign * written
    kv.internal_slots += sign * internal
    kv.fork_dup_tokens += sign * dup
    if seq.group is not None and sign > 0:
        tail = {block for table in tables for block in table.block_ids[shared or 0 :]}
        seq.group.usage = (len(tail) + (shared or 0), sum(len(t.block_ids) for t in tables))


def fork_group(kv: PagedKV, seq: Seq) -> None:
    """Fork a GPU-resident, not yet forked group into ``n`` sequences (lazy, no block used)."""
    group = group_of(seq)
    if group.tables:
        raise InvariantViolation(f"{seq} forks twice")
    _account(kv, seq, -1)
    parent = seq.table
    group.tables = [parent] + [
        fork_sequence(parent, kv.gpu, mode="lazy") for _ in range(group.n - 1)
    ]
    seq.table = SequenceTable(block_size=kv.block_size)
    _account(kv, seq, +1)


def decode_blocks_needed(tables: list[SequenceTable], block_size: int) -> int:
    """Blocks one decode token for every table needs: a new block each when the trailing
    blocks are full, else one copy-on-write copy per extra reference to a shared trailing block
    (the last sequence to write into it finds it unshared)."""
    if tables[0].length % block_size == 0:
        return len(tables)
    trailing = Counter(table.block_ids[-1] for table in tables)
    return sum(count - 1 for count in trailing.values())


def decode_slots(kv: PagedKV, seq: Seq) -> int | None:
    """Take one decode slot for every sequence of a forked group, all or nothing.

    Returns the number of copy-on-write block copies made (drained from the tables: the step
    performs them), or None, with nothing changed, when too few GPU blocks are free.
    """
    tables = group_of(seq).tables
    if tables[0].length % kv.block_size:
        refs = kv.gpu.refcounts
        if all(refs[table.block_ids[-1]] == 1 for table in tables):
            # the hot path: every sequence writes into its own partial trailing block, so no
            # block, copy or shared-token count changes (the running sums stay exact)
            for table in tables:
                table.length += 1
            return 0
    if decode_blocks_needed(tables, kv.block_size) > kv.gpu.free_blocks:
        return None
    _account(kv, seq, -1)
    for table in tables:
        table.append(kv.gpu)
    _account(kv, seq, +1)
    return sum(len(table.drain_copies()) for table in tables)


def reshuffle_beams(kv: PagedKV, seq: Seq, picks: list[int]) -> None:
    """Beam ``i`` of the next step continues beam ``picks[i]``: unpicked beams are freed, a beam
    picked ``m`` times is kept and forked ``m - 1`` times (lazy; no block is allocated).

    The blocks every beam shares (the prompt, mostly) keep their references: each freed beam
    hands its references to one fork (as many forks as freed beams), so a step costs O(the
    beams' tails), not O(prompt) — the same refcounts and free order as dropping and re-taking.
    """
    old = group_of(seq).tables
    counts = Counter(picks)
    _account(kv, seq, -1)
    shared = seq.group.shared = shared_prefix_blocks(old, seq.group.shared)
    for i, table in enumerate(old):
        if i not in counts:
            table.free(kv.gpu, hand_over=shared)
    new: list[SequenceTable] = []
    for i, table in enumerate(old):
        if i in counts:
            new.append(table)
            new += [
                fork_sequence(table, kv.gpu, mode="lazy", adopt=shared)
                for _ in range(counts[i] - 1)
            ]
    seq.group.tables = new
    _account(kv, seq, +1)


def free_group(kv: PagedKV, seq: Seq) -> None:
    """Release every GPU block of a forked group (finish, abort)."""
    group_of(seq)
    _account(kv, seq, -1)
    for table in seq.group.tables:
        table.free(kv.gpu)
    seq.group.tables = []


def swap_group_out(kv: PagedKV, seq: Seq) -> int:
    """Move a forked group's tables to the CPU pool as one swap group (sharing kept)."""
    swap, group = kv.swap_pool(), group_of(seq)
    _account(kv, seq, -1)
    return swap.swap_out(group.tables, kv.gpu).num_blocks


def swap_group_in(kv: PagedKV, seq: Seq) -> int:
    """Bring a swapped-out forked group back to the GPU; the inverse of :func:`swap_group_out`."""
    moved = kv.swap_pool().swap_in(group_of(seq).tables, kv.gpu).num_blocks
    _account(kv, seq, +1)
    return moved


def add_group_decodes(plan: StepPlan, seq: Seq, num_seqs: int) -> None:
    """Schedule one decode token for each of ``num_seqs`` sequences of ``seq``.

    The request appears ``num_seqs`` times in ``plan.seqs`` (the batch counts sequences); the
    first entry carries ``num_new = 1`` (it advances the shared token counters once), the others
    ``num_new = 0`` (their work is added to the plan's token and attention counts here).
    """
    plan.add_decode(seq)
    extra = num_seqs - 1
    context = seq.num_computed + 1
    plan.seqs.extend([seq] * extra)
    plan.num_new.extend([0] * extra)
    plan.decode_tokens += extra
    plan.kv_read_tokens += extra * context


def block_usage(seqs: list[Seq]) -> tuple[int, int]:
    """``(distinct blocks, blocks if unshared)`` over the forked groups among ``seqs`` (groups
    never share blocks with each other, so per-group counts add up)."""
    distinct = independent = 0
    for seq in seqs:
        if seq.group is not None and seq.group.tables:
            blocks, unshared = seq.group.usage
            distinct += blocks
            independent += unshared
    return distinct, independent
