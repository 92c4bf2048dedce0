"""The fan-out of a multi-sequence request (vLLM 0.6's ``SequenceGroup``): parallel sampling,
tree of thought, beam search. How a group's blocks are forked, shared and accounted is the
paged memory's (:mod:`simkv.engine.memory.forks`); this is the request's side."""

from __future__ import annotations

from simkv.kv.block_table import SequenceTable


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
