"""simkv: a discrete-event simulator of LLM serving KV-cache memory management."""

from simkv.kv.allocator import BlockAllocator, OutOfBlocks
from simkv.kv.block_table import SequenceTable, fork_sequence

__version__ = "0.1.0"

__all__ = [
    "BlockAllocator", "OutOfBlocks", "SequenceTable", "__version__", "fork_sequence", "simulate",
]  # fmt: skip


def __getattr__(name: str) -> object:
    """``simkv.simulate`` (:func:`simkv.api.simulate`), imported on first use: ``import simkv``
    stays light for the seed notebook's API."""
    if name == "simulate":
        from simkv.api import simulate

        return simulate
    raise AttributeError(f"module 'simkv' has no attribute {name!r}")
