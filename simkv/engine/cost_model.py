"""Cost models: how long one engine step, one swap and one block copy take on the hardware.

The engine asks once per batched forward pass (never per token), so :meth:`CostModel.step_time_s`
is a few float operations on coefficients folded at construction. Times are seconds of simulated
time for one tensor-parallel group: its GPUs work in lockstep on equal shards, so the group takes
the time of one GPU's share. The constants come from :mod:`simkv.config.cost`, nowhere else.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from simkv.config.cost import (
    CostConfig,
    RooflineCostConfig,
    StepTimeTable,
    TableCostConfig,
    TransferCostConfig,
    read_step_table,
)
from simkv.config.hardware import GpuSpec, ModelSpec

__all__ = [
    "CostModel",
    "RooflineCostModel",
    "StepWork",
    "TableCostModel",
    "Work",
    "attention_read_efficiency",
    "build_cost_model",
    "chunk_attention_pairs",
]


@dataclass(frozen=True, slots=True)
class StepWork:
    """What one batched forward pass computes; every count is a non-negative token count.

    * ``prefill_tokens``: prompt tokens computed this step, including chunks of a chunked prefill
      and tokens recomputed after a preemption.
    * ``decode_tokens``: one per decoding sequence.
    * ``attention_pairs``: Σ over every new token of the context tokens it attends to, itself
      included. A sequence computing ``n`` new tokens after ``c`` cached ones contributes
      ``n·c + n(n+1)/2`` (:func:`chunk_attention_pairs`); a decode token contributes ``c + 1``.
    * ``kv_read_tokens``: Σ over the batch's sequences of the context tokens whose KV the step
      reads, ``c + n`` for the sequence above.
    * ``num_seqs``: sequences in the batch.
    """

    prefill_tokens: int
    decode_tokens: int
    attention_pairs: int
    kv_read_tokens: int
    num_seqs: int

    def __post_init__(self) -> None:
        counts = (self.prefill_tokens, self.decode_tokens, self.attention_pairs)
        if min(*counts, self.kv_read_tokens, self.num_seqs) < 0:
            raise ValueError(f"negative count in {self}")

    @property
    def num_tokens(self) -> int:
        """Tokens whose hidden states the step computes (prefill + decode)."""
        return self.prefill_tokens + self.decode_tokens


class Work(Protocol):
    """What a cost model reads of a step: :class:`StepWork`'s fields. A
    :class:`~simkv.engine.plan.StepPlan` has them too, so the engine prices a plan directly
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


def _empty_step(work: Work) -> ValueError:
    return ValueError(f"empty step (no prefill or decode tokens): {work}")


class _BlockTransfers:
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


def attention_read_efficiency(cfg: RooflineCostConfig, block_size: int) -> float:
    """Bandwidth efficiency of the KV reads: ``mem_eff · min(1, block/knee) ** penalty``."""
    ratio = min(1.0, block_size / cfg.attention_block_size_knee)
    return cfg.memory_efficiency * ratio**cfg.small_block_attention_penalty


class RooflineCostModel(_BlockTransfers):
    """``step = overhead + max(compute, memory) + all-reduce``, per GPU of the tp group.

    * compute = FLOPs / (tp · peak · compute_efficiency), FLOPs = 2 · non-embedding params ·
      tokens + 4 · layers · heads · head_dim · attention_pairs;
    * memory = (weights / tp + written KV) / (hbm · memory_efficiency) + read KV / (hbm ·
      :func:`attention_read_efficiency`), KV bytes being ``tokens · kv_bytes_per_token / tp``;
    * all-reduce (tp > 1 only) = 2 · layers · (latency + 2(tp−1)/tp · tokens · hidden · dtype
      bytes / (interconnect · interconnect_efficiency)), two ring all-reduces per layer.
    """

    __slots__ = (
        "_allreduce_fixed_s",
        "_allreduce_per_token_s",
        "_compute_per_pair_s",
        "_compute_per_token_s",
        "_kv_read_per_token_s",
        "_kv_write_per_token_s",
        "_overhead_s",
        "_weights_s",
    )

    def __init__(
        self,
        cfg: RooflineCostConfig,
        model: ModelSpec,
        gpu: GpuSpec,
        *,
        tensor_parallel: int,
        block_size: int,
    ) -> None:
        super().__init__(cfg, model, gpu, tensor_parallel=tensor_parallel, block_size=block_size)
        tp = tensor_parallel
        flop_rate = tp * gpu.peak_flops_per_s * cfg.compute_efficiency
        byte_rate = gpu.hbm_bytes_per_s * cfg.memory_efficiency
        read_rate = gpu.hbm_bytes_per_s * attention_read_efficiency(cfg, block_size)
        kv_shard_bytes = model.kv_bytes_per_token / tp
        attention_width = model.num_attention_heads * model.head_dim
        self._overhead_s = cfg.step_overhead_ms * 1e-3
        self._compute_per_token_s = 2 * model.num_parameters_nonembedding / flop_rate
        self._compute_per_pair_s = 4 * model.num_layers * attention_width / flop_rate
        self._weights_s = model.weight_bytes / tp / byte_rate
        self._kv_write_per_token_s = kv_shard_bytes / byte_rate
        self._kv_read_per_token_s = kv_shard_bytes / read_rate
        self._allreduce_fixed_s = 0.0
        self._allreduce_per_token_s = 0.0
        if tp > 1:
            link_rate = gpu.interconnect_bytes_per_s * cfg.interconnect_efficiency
            ring_factor = 2 * (tp - 1) / tp
            token_bytes = model.hidden_size * model.dtype_bytes
            self._allreduce_fixed_s = 2 * model.num_layers * cfg.allreduce_latency_us * 1e-6
            self._allreduce_per_token_s = (
                2 * model.num_layers * ring_factor * token_bytes / link_rate
            )

    def step_time_s(self, work: Work) -> float:
        tokens = work.prefill_tokens + work.decode_tokens
        if tokens <= 0:
            raise _empty_step(work)
        compute_s = (
            tokens * self._compute_per_token_s + work.attention_pairs * self._compute_per_pair_s
        )
        memory_s = (
            self._weights_s
            + tokens * self._kv_write_per_token_s
            + work.kv_read_tokens * self._kv_read_per_token_s
        )
        allreduce_s = self._allreduce_fixed_s + tokens * self._allreduce_per_token_s
        return self._overhead_s + max(compute_s, memory_s) + allreduce_s


# ---------------------------------------------------------------------------------------------
# Measured step times (kind: table)


def _segment(xs: Sequence[float], x: float) -> int:
    """Index ``i`` of the segment ``[xs[i], xs[i+1]]`` that serves ``x``; needs len(xs) >= 2."""
    return min(max(bisect_right(xs, x) - 1, 0), len(xs) - 2)


def _line(x0: float, y0: float, x1: float, y1: float, x: float) -> float:
    """The segment through both points; beyond ``x1`` its slope is floored at zero."""
    slope = (y1 - y0) / (x1 - x0)
    if x > x1:
        return y1 + max(slope, 0.0) * (x - x1)
    return y0 + slope * (x - x0)


def _clamped_linear(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    if len(xs) == 1 or x <= xs[0]:
        return ys[0]
    i = _segment(xs, x)
    return _line(xs[i], ys[i], xs[i + 1], ys[i + 1], x)


def _table_time_ms(table: StepTimeTable, num_tokens: float, kv_read_tokens: float) -> float:
    """Bilinear inside the grid, clamped-linear outside (see ``TableCostConfig``)."""
    ks, rows = table.kv_read_tokens, table.times_ms
    if len(ks) == 1 or kv_read_tokens <= ks[0]:
        return _clamped_linear(table.num_tokens, rows[0], num_tokens)
    j = _segment(ks, kv_read_tokens)
    low = _clamped_linear(table.num_tokens, rows[j], num_tokens)
    high = _clamped_linear(table.num_tokens, rows[j + 1], num_tokens)
    return _line(ks[j], low, ks[j + 1], high, kv_read_tokens)


class TableCostModel(_BlockTransfers):
    """Step times from a :class:`StepTimeTable`; swap and copy as in the roofline model."""

    __slots__ = ("_table",)

    def __init__(
        self,
        cfg: TableCostConfig,
        model: ModelSpec,
        gpu: GpuSpec,
        *,
        tensor_parallel: int,
        block_size: int,
        table: StepTimeTable,
    ) -> None:
        super().__init__(cfg, model, gpu, tensor_parallel=tensor_parallel, block_size=block_size)
        self._table = table

    def step_time_s(self, work: Work) -> float:
        tokens = work.prefill_tokens + work.decode_tokens
        if tokens <= 0:
            raise _empty_step(work)
        return _table_time_ms(self._table, tokens, work.kv_read_tokens) * 1e-3


def build_cost_model(
    cfg: CostConfig,
    model: ModelSpec,
    gpu: GpuSpec,
    *,
    tensor_parallel: int,
    block_size: int,
    base_dir: Path,
) -> CostModel:
    """The cost model ``cfg`` describes; a table's relative ``path`` resolves against
    ``base_dir`` (the config file's folder)."""
    if isinstance(cfg, RooflineCostConfig):
        return RooflineCostModel(
            cfg, model, gpu, tensor_parallel=tensor_parallel, block_size=block_size
        )
    table = read_step_table(cfg.path if cfg.path.is_absolute() else base_dir / cfg.path)
    return TableCostModel(
        cfg, model, gpu, tensor_parallel=tensor_parallel, block_size=block_size, table=table
    )
