"""How many KV blocks fit on the GPUs: the size of the block pool a run gets.

Everything is per GPU of the tensor-parallel group: weights and KV are split evenly over the
``tp`` GPUs, so one logical block of ``block_size`` tokens occupies
``block_size · kv_bytes_per_token / tp`` bytes on each of them and the group holds as many
logical blocks as one GPU holds shards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simkv.config.hardware import GpuSpec, ModelSpec

__all__ = ["InsufficientMemory", "KVSizing", "blocks_from_bytes", "kv_capacity_blocks"]

_GIB = float(2**30)


class InsufficientMemory(ValueError):
    """The KV cache would get no block at all; the message names every term in GiB."""


def _check_shape(tensor_parallel: int, block_size: int) -> None:
    if tensor_parallel < 1 or block_size < 1:
        raise ValueError(
            f"tensor_parallel ({tensor_parallel}) and block_size ({block_size}) must be >= 1"
        )


def _block_shard_bytes(model: ModelSpec, tensor_parallel: int, block_size: int) -> float:
    return block_size * model.kv_bytes_per_token / tensor_parallel


def kv_capacity_blocks(
    model: ModelSpec,
    gpu: GpuSpec,
    *,
    tensor_parallel: int,
    block_size: int,
    gpu_memory_utilization: float,
    activation_reserve_bytes: int,
) -> int:
    """Blocks left for the KV cache once weights and activations are placed, per GPU.

    ``(memory · utilization − weights / tp − activation_reserve) // (block bytes / tp)``, where
    ``utilization`` is the fraction of device memory the server may use (0 < u ≤ 1) and
    ``activation_reserve_bytes`` the per-GPU peak activation and workspace memory.

    Raises:
        InsufficientMemory: not even one block fits.
    """
    _check_shape(tensor_parallel, block_size)
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    if activation_reserve_bytes < 0:
        raise ValueError(f"activation_reserve_bytes must be >= 0, got {activation_reserve_bytes}")
    usable_bytes = gpu.memory_bytes * gpu_memory_utilization
    weight_shard_bytes = model.weight_bytes / tensor_parallel
    kv_bytes = usable_bytes - weight_shard_bytes - activation_reserve_bytes
    block_bytes = _block_shard_bytes(model, tensor_parallel, block_size)
    blocks = math.floor(kv_bytes / block_bytes)
    if blocks <= 0:
        raise InsufficientMemory(
            f"no KV block fits on {gpu.name} for {model.name} (tp={tensor_parallel}), per GPU: "
            f"{gpu.memory_bytes / _GIB:.2f} GiB × utilization {gpu_memory_utilization:g} "
            f"= {usable_bytes / _GIB:.2f} GiB usable − {weight_shard_bytes / _GIB:.2f} GiB "
            f"weights − {activation_reserve_bytes / _GIB:.2f} GiB activation reserve "
            f"= {kv_bytes / _GIB:.2f} GiB for KV, one block needs {block_bytes / _GIB:.4f} GiB"
        )
    return blocks


def blocks_from_bytes(
    kv_bytes: int, model: ModelSpec, *, tensor_parallel: int, block_size: int
) -> int:
    """Blocks in ``kv_bytes`` of KV memory per GPU (a capacity given directly, not derived).

    Raises:
        InsufficientMemory: ``kv_bytes`` holds less than one block.
    """
    _check_shape(tensor_parallel, block_size)
    # integer arithmetic: exact even when the block shard is not a whole number of bytes
    blocks = kv_bytes * tensor_parallel // (block_size * model.kv_bytes_per_token)
    if blocks <= 0:
        block_bytes = _block_shard_bytes(model, tensor_parallel, block_size)
        raise InsufficientMemory(
            f"{kv_bytes / _GIB:.4f} GiB of KV memory per GPU holds no block of {block_size} "
            f"tokens of {model.name} (tp={tensor_parallel}), which needs "
            f"{block_bytes / _GIB:.4f} GiB"
        )
    return blocks


@dataclass(frozen=True, slots=True)
class KVSizing:
    """The KV pool a config resolves to (per GPU of the tensor-parallel group)."""

    num_blocks: int
    block_size: int
    block_bytes: int
    swap_blocks: int

    @property
    def token_slots(self) -> int:
        return self.num_blocks * self.block_size
