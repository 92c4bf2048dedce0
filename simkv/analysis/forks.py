"""Blocks held by a forked tree of sequences vs the same sequences stored independently.

The seed notebook's exercise 3: one parent sequence (a prompt plus ``parent_tokens`` of its own
output) forks into ``children`` sequences, each of which then appends ``child_tokens``. The count
is taken on the real KV core (:class:`~simkv.kv.allocator.BlockAllocator`,
:class:`~simkv.kv.block_table.SequenceTable`, :func:`~simkv.kv.block_table.fork_sequence`), so it
includes every copy-on-write block exactly as the engine would allocate it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from simkv.kv.allocator import BlockAllocator
from simkv.kv.block_table import SequenceTable, fork_sequence


@dataclass(frozen=True, slots=True)
class ForkCount:
    """Result of one tree.

    ``forked_blocks``: distinct physical blocks in use at the end (parent included when kept).
    ``independent_blocks``: blocks ``children`` unshared sequences of the same length would hold.
    ``copies``: block copies performed (eager fork copies + copy-on-write copies).
    """

    forked_blocks: int
    independent_blocks: int
    copies: int

    @property
    def saving(self) -> float:
        """``1 - forked / independent`` (0 when there is nothing to store)."""
        if self.independent_blocks == 0:
            return 0.0
        return 1.0 - self.forked_blocks / self.independent_blocks


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def tree_of_thought_blocks(
    prompt_tokens: int,
    parent_tokens: int,
    child_tokens: int,
    children: int = 10,
    block_size: int = 16,
    mode: Literal["lazy", "eager"] = "lazy",
    *,
    keep_parent: bool = True,
) -> ForkCount:
    """Count blocks of a 1-parent, ``children``-child tree built with ``fork_sequence``.

    The parent holds ``prompt_tokens + parent_tokens`` tokens; each child is forked from it
    (``mode``) and appends ``child_tokens`` at once. With ``keep_parent`` (default) the parent
    stays alive (a tree-of-thought keeps its inner node), so with a partial trailing block every
    child copies it; without, the parent is freed right after the fork (vLLM's parallel sampling,
    where the parent becomes one of the children), so under ``lazy`` the last child to
    write finds the block unshared and writes in place.

    Raises ``ValueError`` for negative token counts, ``children < 1`` or ``block_size < 1``.
    """
    if min(prompt_tokens, parent_tokens, child_tokens) < 0:
        raise ValueError("token counts must be >= 0")
    if children < 1 or block_size < 1:
        raise ValueError(f"need children >= 1 and block_size >= 1, got {children}, {block_size}")
    parent_len = prompt_tokens + parent_tokens
    child_blocks = _ceil_div(parent_len + child_tokens, block_size)
    alloc = BlockAllocator(_ceil_div(parent_len, block_size) + children * child_blocks + 1,
                           block_size)  # fmt: skip
    parent = SequenceTable(block_size=block_size)
    parent.append_tokens(alloc, parent_len)
    kids = [fork_sequence(parent, alloc, mode=mode) for _ in range(children)]
    tables = [*kids, parent]
    if not keep_parent:
        parent.free(alloc)
        tables.pop()
    copies = 0
    for kid in kids:
        kid.append_tokens(alloc, child_tokens)
        copies += len(kid.drain_copies())
    alloc.check(tables)
    return ForkCount(alloc.used_blocks, children * child_blocks, copies)
