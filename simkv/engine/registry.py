"""The scheduler registry: which scheduler class runs a scheduler config model.

Every module of :mod:`simkv.engine.schedulers` is imported once, on first use, and registers
its class with :func:`register` (its config model → the class). A scheduler class builds itself
from the whole run config and the KV pool's sizing (``build``), choosing its KV memory by its
model's traits (:func:`paged_memory` or :func:`contiguous_memory`). Adding a scheduler: one
module in ``simkv/engine/schedulers/``, its config model in ``simkv/config/policy.py``, its
tests; nothing else changes (``docs/architecture.md``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from functools import cache
from typing import Protocol, TypeVar

import numpy as np

from simkv.config.base import Frozen
from simkv.config.sim import SimConfig
from simkv.engine.capacity import KVSizing
from simkv.engine.memory.contiguous import ContiguousKV
from simkv.engine.memory.paged import PagedKV
from simkv.engine.scheduler import Scheduler
from simkv.metrics.recorder import Recorder


class SchedulerClass(Protocol):
    """A registered scheduler class: it builds itself for one run."""

    @classmethod
    def build(
        cls, cfg: SimConfig, sizing: KVSizing, recorder: Recorder, rng: np.random.Generator
    ) -> Scheduler: ...


_REGISTRY: dict[type[Frozen], SchedulerClass] = {}
_C = TypeVar("_C")


def register(model: type[Frozen]) -> Callable[[_C], _C]:
    """Class decorator: the decorated scheduler class runs configs of ``model``."""

    def add(cls: _C) -> _C:
        if model in _REGISTRY:
            raise ValueError(f"{model.__name__} already has a scheduler: {_REGISTRY[model]}")
        _REGISTRY[model] = cls  # type: ignore[assignment]
        return cls

    return add


@cache
def _load_all() -> None:
    """Import every scheduler module (each registers itself), once. (Some may be imported
    already, directly: the registry is complete only after this.)"""
    from simkv.engine import schedulers

    for info in pkgutil.iter_modules(schedulers.__path__):
        importlib.import_module(f"{schedulers.__name__}.{info.name}")


def scheduler_class(model: type[Frozen]) -> SchedulerClass:
    """The scheduler class registered for the config model ``model``."""
    _load_all()
    try:
        return _REGISTRY[model]
    except KeyError:
        raise LookupError(f"no scheduler is registered for {model.__name__}") from None


def build_scheduler(
    cfg: SimConfig, sizing: KVSizing, recorder: Recorder, rng: np.random.Generator
) -> Scheduler:
    """The scheduler ``cfg.scheduler`` names, over the KV memory its traits ask for; ``rng``
    is the run's stream for scheduler draws (beam parents; ``simkv.run.assemble.Stream``)."""
    return scheduler_class(type(cfg.scheduler)).build(cfg, sizing, recorder, rng)


def paged_memory(cfg: SimConfig, sizing: KVSizing) -> PagedKV:
    """A paged scheduler's KV memory: the block pool (with vLLM V1's null block when its
    traits say so), the prefix cache and, for a policy that swaps (its traits), the CPU swap
    pool."""
    swaps = cfg.scheduler.traits.swap
    return PagedKV(
        sizing.num_blocks, sizing.block_size,
        reuse=cfg.kv_cache.reuse or cfg.scheduler.traits.reuse,
        swap_blocks=sizing.swap_blocks if swaps else 0, block_bytes=sizing.block_bytes,
        prefix_caching=cfg.kv_cache.prefix_caching or "none",
        null_block=cfg.scheduler.traits.null_block,
    )  # fmt: skip


def contiguous_memory(cfg: SimConfig, sizing: KVSizing, reservation: str) -> ContiguousKV:
    """A contiguous scheduler's KV memory: the pool's slots, reserved per request by
    ``reservation`` (``max``, ``pow2`` or ``oracle``)."""
    return ContiguousKV(sizing.token_slots, reservation, cfg.model.max_model_len)
