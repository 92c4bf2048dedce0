"""A replica group's KV pool from its config: given blocks, given GiB, or what the GPU's memory
leaves after the weights (:mod:`simkv.engine.capacity`), and the share KV usage is taken of."""

from __future__ import annotations

from simkv.config.limits import MAX_BLOCKS
from simkv.config.sim import GIB, SimConfig
from simkv.engine.capacity import (
    InsufficientMemory,
    KVSizing,
    blocks_from_bytes,
    kv_capacity_blocks,
)
from simkv.errors import InputError


def kv_sizing(cfg: SimConfig) -> KVSizing:
    """Resolve the KV pool of one engine: given blocks, given GiB, or derived from GPU memory;
    an :class:`InputError` at ``kv_cache`` when the memory holds no pool or more blocks than
    the simulator holds (``simkv.config.limits.MAX_BLOCKS``)."""
    kv, tp, model = cfg.kv_cache, cfg.parallel.tensor_parallel, cfg.model
    try:
        if kv.num_blocks is not None:
            blocks = kv.num_blocks
        elif kv.capacity_gib is not None:
            blocks = blocks_from_bytes(
                int(kv.capacity_gib * GIB), model, tensor_parallel=tp, block_size=kv.block_size
            )
        else:
            blocks = kv_capacity_blocks(
                model, cfg.gpu, tensor_parallel=tp, block_size=kv.block_size,
                gpu_memory_utilization=kv.gpu_memory_utilization,
                activation_reserve_bytes=int(kv.activation_reserve_gib * GIB),
            )  # fmt: skip
    except InsufficientMemory as err:
        raise InputError(str(err), field="kv_cache") from None
    if blocks > MAX_BLOCKS:
        raise InputError(
            f"{blocks:,} KV blocks per GPU, more than the {MAX_BLOCKS:,} the simulator holds; "
            "use a larger block_size or less memory",
            field="kv_cache",
        )
    block_bytes = kv.block_size * model.kv_bytes_per_token // tp
    swap_blocks = int(kv.swap_space_gib * GIB) // block_bytes
    return KVSizing(blocks, kv.block_size, block_bytes, swap_blocks)


def usable_blocks(cfg: SimConfig, sizing: KVSizing) -> int:
    """The blocks requests can hold: the pool less vLLM V1's null block where the scheduler
    has one (``SchedulerTraits.null_block``)."""
    return sizing.num_blocks - cfg.scheduler.traits.null_block


def usage_capacity(cfg: SimConfig, sizing: KVSizing) -> int:
    """What KV usage is a share of: the usable blocks of a paged pool, the token slots of
    contiguous memory (accounted in slots)."""
    if cfg.scheduler.traits.memory == "contiguous":
        return sizing.token_slots
    return usable_blocks(cfg, sizing)
