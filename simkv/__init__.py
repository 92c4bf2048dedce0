"""simkv: a discrete-event simulator of LLM serving KV-cache memory management.

The paged KV core's names (``BlockAllocator``, ``OutOfBlocks``, ``SequenceTable``,
``fork_sequence``) and the Python API (:mod:`simkv.api`: ``simulate``, ``sweep``,
``capacity``, ``compare``) are imported on first use: ``import simkv`` loads nothing else, so
importing any module of simkv loads only what that module needs; ``dir(simkv)`` lists them all.

``simkv.sweep`` and ``simkv.capacity`` are the API's functions, although packages of the same
names exist (:mod:`simkv.sweep`, :mod:`simkv.capacity`): importing a package binds it as an
attribute of its parent, which would hide the function, so :class:`_Front` keeps those names for
the functions (the packages stay importable by name: ``from simkv.sweep import run_sweep``).
"""

from __future__ import annotations

import importlib
import sys
import types

__version__ = "0.1.0"

_LAZY = {
    "BlockAllocator": "simkv.kv.allocator",
    "OutOfBlocks": "simkv.kv.allocator",
    "SequenceTable": "simkv.kv.block_table",
    "fork_sequence": "simkv.kv.block_table",
    "simulate": "simkv.api",
    "sweep": "simkv.api",
    "capacity": "simkv.api",
    "compare": "simkv.api",
    "InputError": "simkv.errors",
}

__all__ = sorted([*_LAZY, "__version__"])


def __getattr__(name: str) -> object:
    """One of :data:`__all__`, imported from its module on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'simkv' has no attribute {name!r}")


def __dir__() -> list[str]:
    """:data:`__all__`: what tab completion offers (the lazy names too)."""
    return __all__


class _ApiName:
    """A name of the API that is also a subpackage's: reading it gives the API's function;
    the import system's binding of the subpackage (it sets the attribute after importing it)
    goes into the module's dict, which nothing reads (imports use ``sys.modules``)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, module: object, owner: type | None = None) -> object:
        if module is None:
            return self
        return getattr(importlib.import_module("simkv.api"), self.name)

    def __set__(self, module: types.ModuleType, value: object) -> None:
        module.__dict__[self.name] = value


class _Front(types.ModuleType):
    """The type of the ``simkv`` module: a module whose ``sweep`` and ``capacity`` are the
    API's functions whatever of :mod:`simkv.sweep` and :mod:`simkv.capacity` was imported."""

    sweep = _ApiName()
    capacity = _ApiName()


sys.modules[__name__].__class__ = _Front
