"""Multi-sequence requests on the paged KV memory (vLLM 0.6's ``SequenceGroup``): parallel
sampling, tree of thought, beam search.

A request with a :class:`~simkv.engine.request.fork_group.ForkGroup` runs as one sequence (its
``Seq.table``) until it has sampled ``fork_after + 1`` output tokens; right after that step it
forks (:meth:`ForkPart.fork`: ``fork_sequence``, lazy copy-on-write) into ``n`` sequences held in
``group.tables``, and its own ``Seq.table`` is left empty. Output lengths are fixed per request,
so the sequences of a group always have the same length: they decode in lock-step (one token
each per decode step) and finish together, and the request's token counters (``num_computed``,
``num_output``, ...) describe every sequence. Beam groups re-draw their beams after every decode
step (:meth:`ForkPart.reshuffle_beams`).

KV accounting of a forked group (in the memory's :class:`~simkv.engine.memory.sums.KVSums`;
:func:`group_sums`): ``written`` = Σ over its tables of ``num_computed``; ``dup`` = computed
tokens in shared blocks counted once per extra reference (so ``written - dup`` counts a shared
block once); ``internal`` = never-written slots past the final length, once per distinct
trailing block.
"""

from __future__ import annotations

from collections import Counter

from simkv.engine.memory.sums import KVSums
from simkv.engine.request.seq import Seq, group_of, tables_of
from simkv.kv.allocator import BlockAllocator, InvariantViolation
from simkv.kv.block_table import SequenceTable, fork_sequence
from simkv.kv.waste import unwritten_slots


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


def single_internal(seq: Seq, block_size: int) -> int:
    """A single-sequence request's never-written slots: its blocks' slots past its final
    length (its share of ``KVSums.internal_slots``; a group's is :func:`group_sums`'s)."""
    return unwritten_slots(len(seq.table.block_ids), block_size, seq.final_kv_tokens)


def decode_blocks_needed(tables: list[SequenceTable], block_size: int) -> int:
    """Blocks one decode token for every table needs: a new block each when the trailing
    blocks are full, else one copy-on-write copy per extra reference to a shared trailing block
    (the last sequence to write into it finds it unshared)."""
    if tables[0].length % block_size == 0:
        return len(tables)
    trailing = Counter(table.block_ids[-1] for table in tables)
    return sum(count - 1 for count in trailing.values())


class ForkPart:
    """The fork groups' side of a paged memory: it changes groups' blocks on ``gpu`` and keeps
    their share of ``sums`` exact around every change (:meth:`account`)."""

    __slots__ = ("block_size", "gpu", "sums")

    def __init__(self, gpu: BlockAllocator, block_size: int, sums: KVSums) -> None:
        self.gpu = gpu
        self.block_size = block_size
        self.sums = sums

    def account(self, seq: Seq, sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) ``seq``'s share of the running sums.

        Called around every change of a group's blocks, so it also refreshes ``group.usage``.
        """
        tables, group = tables_of(seq), seq.group
        shared = None
        if group is not None and group.tables:
            shared = group.shared = shared_prefix_blocks(tables, group.shared)
        written, internal, dup = group_sums(
            tables, seq.num_computed, seq.final_kv_tokens, self.block_size, shared
        )
        self.sums.group(sign, written, internal, dup)
        if group is not None and sign > 0:
            tail = {block for table in tables for block in table.block_ids[shared or 0 :]}
            group.usage = (len(tail) + (shared or 0), sum(len(t.block_ids) for t in tables))

    def fork(self, seq: Seq) -> None:
        """Fork a GPU-resident, not yet forked group into ``n`` sequences (lazy, no block
        used)."""
        group = group_of(seq)
        if group.tables:
            raise InvariantViolation(f"{seq} forks twice")
        self.account(seq, -1)
        parent = seq.table
        group.tables = [parent] + [
            fork_sequence(parent, self.gpu, mode="lazy") for _ in range(group.n - 1)
        ]
        seq.table = SequenceTable(block_size=self.block_size)
        self.account(seq, +1)

    def decode_slots(self, seq: Seq) -> int | None:
        """Take one decode slot for every sequence of a forked group, all or nothing.

        Returns the number of copy-on-write block copies made (drained from the tables: the
        step performs them), or None, with nothing changed, when too few GPU blocks are free.
        """
        tables, gpu = group_of(seq).tables, self.gpu
        if tables[0].length % self.block_size:
            refs = gpu.refcounts
            if all(refs[table.block_ids[-1]] == 1 for table in tables):
                # the hot path: every sequence writes into its own partial trailing block, so
                # no block, copy or shared-token count changes (the running sums stay exact)
                for table in tables:
                    table.length += 1
                return 0
        if decode_blocks_needed(tables, self.block_size) > gpu.free_blocks:
            return None
        self.account(seq, -1)
        for table in tables:
            table.append(gpu)
        self.account(seq, +1)
        return sum(len(table.drain_copies()) for table in tables)

    def reshuffle_beams(self, seq: Seq, picks: list[int]) -> None:
        """Beam ``i`` of the next step continues beam ``picks[i]``: unpicked beams are freed, a
        beam picked ``m`` times is kept and forked ``m - 1`` times (lazy; no block is allocated).

        The blocks every beam shares (the prompt, mostly) keep their references: each freed
        beam hands its references to one fork (as many forks as freed beams), so a step costs
        O(the beams' tails), not O(prompt) — the same refcounts and free order as dropping and
        re-taking.
        """
        group, gpu = group_of(seq), self.gpu
        old = group.tables
        counts = Counter(picks)
        self.account(seq, -1)
        shared = group.shared = shared_prefix_blocks(old, group.shared)
        for i, table in enumerate(old):
            if i not in counts:
                table.free(gpu, hand_over=shared)
        new: list[SequenceTable] = []
        for i, table in enumerate(old):
            if i in counts:
                new.append(table)
                new += [
                    fork_sequence(table, gpu, mode="lazy", adopt=shared)
                    for _ in range(counts[i] - 1)
                ]
        group.tables = new
        self.account(seq, +1)

    def free_group(self, seq: Seq) -> None:
        """Release every GPU block of a forked group (finish, abort)."""
        group = group_of(seq)
        self.account(seq, -1)
        for table in group.tables:
            table.free(self.gpu)
        group.tables = []


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
