"""simkv: a discrete-event simulator of LLM serving KV-cache memory management."""

from simkv.kv.allocator import BlockAllocator, OutOfBlocks
from simkv.kv.block_table import SequenceTable, fork_sequence

__version__ = "0.1.0"

__all__ = ["BlockAllocator", "OutOfBlocks", "SequenceTable", "__version__", "fork_sequence"]
