"""The paged KV memory: block allocator, block tables with copy-on-write fork, CPU swap pool.

Knows nothing of time, SimPy, or request text; everything here is synchronous plain Python.
"""

from simkv.kv.allocator import (
    BlockAllocator,
    BlockError,
    BlockId,
    DoubleFree,
    InvalidBlockId,
    InvariantViolation,
    OutOfBlocks,
    ReuseOrder,
)
from simkv.kv.block_table import CopyOp, SequenceTable, fork_sequence
from simkv.kv.swap import AllocStatus, SwapPool, SwapResult

__all__ = [
    "AllocStatus",
    "BlockAllocator",
    "BlockError",
    "BlockId",
    "CopyOp",
    "DoubleFree",
    "InvalidBlockId",
    "InvariantViolation",
    "OutOfBlocks",
    "ReuseOrder",
    "SequenceTable",
    "SwapPool",
    "SwapResult",
    "fork_sequence",
]
