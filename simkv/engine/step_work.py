"""What one engine step computes, and what every cost model shares.

:class:`StepWork` (and the :class:`Work` protocol that a
:class:`~simkv.engine.request.plan.StepPlan` also satisfies) is what the engine hands a
:class:`CostModel` once per batched forward pass;
:class:`BlockTransfers` prices swaps and copy-on-write copies for every model. The models
themselves: :mod:`simkv.engine.cost_model` (the roofline), :mod:`simkv.engine.table_cost`
(measured step tables), :mod:`simkv.engine.phase_cost` (per-phase fits). This module imports
nothing from the rest of the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from simkv.config.cost import TransferCostConfig
from simkv.config.hardware import GpuSpec, ModelSpec

__all__ = [
    "BlockTransfers",
    "CostModel",
    "StepWork",
    "Work",
    "chunk_attention_pairs",
    "empty_step",
]


@dataclass(frozen=True, slots=True)
class StepWork:
    """What one batched forward pass computes; every count is a non-negative token count.

    * ``prefill_tokens``: prompt tokens computed this step, including chunks of a chunked prefill
      and tokens recomputed after a preemption.
    * ``decode_tokens``: one per decoding sequence.
    * ``attention_pairs``: Σ over every *prefill* token of the context tokens it attends to,
      itself included (the compute-bound attention). A sequence computing ``n`` prefill tokens
      after ``c`` cached ones contributes ``n·c + n(n+1)/2`` (:func:`chunk_attention_pairs`); a
      decode token contributes nothing here (its attention is bound by reading the KV).
    * ``kv_read_tokens``: Σ over the batch's sequences of the tokens whose KV the step reads
      from the paged cache: ``c`` for the prefill chunk above (its own new tokens' keys and
      values are computed in the step, not read back), ``c + 1`` for a decode token (its new
      key and value are written to the cache before attention reads the whole context).
    * ``num_seqs``: sequences in the batch (≥ ``decode_tokens`` when there is a prefill: each
      decode token belongs to one of them).
    * ``prefill_kv_tokens``: the part of ``kv_read_tokens`` the prefill chunks read (their
      ``c``); the rest is read by the decodes.
    * ``queued_requests``: requests left in the scheduler's waiting queue when the step
      launches (host work only: a scheduling pass that grows with its queue).
    """

    prefill_tokens: int
    decode_tokens: int
    attention_pairs: int
    kv_read_tokens: int
    num_seqs: int
    prefill_kv_tokens: int = 0
    queued_requests: int = 0

    def __post_init__(self) -> None:
        counts = (self.prefill_tokens, self.decode_tokens, self.attention_pairs)
        kv = (self.kv_read_tokens, self.prefill_kv_tokens)
        if min(*counts, *kv, self.num_seqs, self.queued_requests) < 0:
            raise ValueError(f"negative count in {self}")
        if self.prefill_kv_tokens > self.kv_read_tokens:
            raise ValueError(f"prefill_kv_tokens exceeds kv_read_tokens in {self}")

    @property
    def num_tokens(self) -> int:
        """Tokens whose hidden states the step computes (prefill + decode)."""
        return self.prefill_tokens + self.decode_tokens


class Work(Protocol):
    """What a cost model reads of a step: :class:`StepWork`'s fields. A
    :class:`~simkv.engine.request.plan.StepPlan` has them too, so the engine prices a plan directly
    (no per-step copy); ``StepPlan.work()`` gives the checked :class:`StepWork`."""

    @property
    def prefill_tokens(self) -> int: ...
    @property
    def decode_tokens(self) -> int: ...
    @property
    def attention_pairs(self) -> int: ...
    @property
    def kv_read_tokens(self) -> int: ...
    @property
    def num_seqs(self) -> int: ...
    @property
    def prefill_kv_tokens(self) -> int: ...
    @property
    def queued_requests(self) -> int: ...


def chunk_attention_pairs(new_tokens: int, cached_tokens: int) -> int:
    """Attention pairs of ``new_tokens`` computed after ``cached_tokens`` (causal mask)."""
    return new_tokens * cached_tokens + new_tokens * (new_tokens + 1) // 2


class CostModel(Protocol):
    """Simulated durations, in seconds, of the operations the engine performs."""

    def step_time_s(self, work: Work) -> float:
        """One batched forward pass; ``ValueError`` if it computes no token."""
        ...

    def swap_time_s(self, num_blocks: int) -> float:
        """Moving ``num_blocks`` KV blocks between GPU and CPU memory, one direction."""
        ...

    def copy_time_s(self, num_blocks: int) -> float:
        """Copying ``num_blocks`` KV blocks within GPU memory (copy-on-write)."""
        ...


def _check_shape(tensor_parallel: int, block_size: int) -> None:
    if tensor_parallel < 1 or block_size < 1:
        raise ValueError(
            f"tensor_parallel ({tensor_parallel}) and block_size ({block_size}) must be >= 1"
        )


def _check_blocks(num_blocks: int) -> None:
    if num_blocks < 0:
        raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")


def empty_step(work: Work) -> ValueError:
    """The error a model raises for a step that computes no token."""
    return ValueError(f"empty step (no prefill or decode tokens): {work}")


class BlockTransfers:
    """Swap and copy times, linear in the number of blocks; shared by every cost model.

    A block holds ``block_size`` tokens of KV; each GPU of the tensor-parallel group moves its
    ``1/tp`` shard over its own links in parallel, so one block costs, per direction,
    ``2 · num_layers · swap_copy_latency + shard_bytes / (host_link · host_link_efficiency)`` to
    swap and
    ``2 · shard_bytes / (hbm · memory_efficiency)`` to copy (read + write).
    """

    __slots__ = ("_copy_per_block_s", "_swap_per_block_s")

    def __init__(
        self,
        cfg: TransferCostConfig,
        model: ModelSpec,
        gpu: GpuSpec,
        *,
        tensor_parallel: int,
        block_size: int,
    ) -> None:
        _check_shape(tensor_parallel, block_size)
        shard_bytes = block_size * model.kv_bytes_per_token / tensor_parallel
        link_rate = gpu.host_link_bytes_per_s * cfg.host_link_efficiency
        copies_s = 2 * model.num_layers * cfg.swap_copy_latency_us * 1e-6
        self._swap_per_block_s = copies_s + shard_bytes / link_rate
        self._copy_per_block_s = 2 * shard_bytes / (gpu.hbm_bytes_per_s * cfg.memory_efficiency)

    def swap_time_s(self, num_blocks: int) -> float:
        _check_blocks(num_blocks)
        return num_blocks * self._swap_per_block_s

    def copy_time_s(self, num_blocks: int) -> float:
        _check_blocks(num_blocks)
        return num_blocks * self._copy_per_block_s
