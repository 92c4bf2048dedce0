"""simkv: a discrete-event simulator of LLM serving KV-cache memory management.

The paged KV core's names (``BlockAllocator``, ``OutOfBlocks``, ``SequenceTable``,
``fork_sequence``) and ``simkv.simulate`` (:func:`simkv.api.simulate`) are imported on first
use: ``import simkv`` loads nothing else, so importing any module of simkv loads only what that
module needs.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "BlockAllocator": "simkv.kv.allocator",
    "OutOfBlocks": "simkv.kv.allocator",
    "SequenceTable": "simkv.kv.block_table",
    "fork_sequence": "simkv.kv.block_table",
    "simulate": "simkv.api",
}

__all__ = sorted([*_LAZY, "__version__"])


def __getattr__(name: str) -> object:
    """One of :data:`__all__`, imported from its module on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'simkv' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
