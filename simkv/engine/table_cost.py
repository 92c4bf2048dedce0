"""Measured step times (``cost_model: {kind: table}``): simkv's step-time CSV, priced by
bilinear interpolation over (tokens, KV read tokens), clamped-linear outside the grid."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from simkv.config.cost import TableCostConfig
from simkv.config.hardware import GpuSpec, ModelSpec
from simkv.engine.step_work import BlockTransfers, Work, empty_step
from simkv.measured.step_table import StepTimeTable

__all__ = ["TableCostModel", "clamped_linear"]


def _segment(xs: Sequence[float], x: float) -> int:
    """Index ``i`` of the segment ``[xs[i], xs[i+1]]`` that serves ``x``; needs len(xs) >= 2."""
    return min(max(bisect_right(xs, x) - 1, 0), len(xs) - 2)


def _line(x0: float, y0: float, x1: float, y1: float, x: float) -> float:
    """The segment through both points; beyond ``x1`` its slope is floored at zero."""
    slope = (y1 - y0) / (x1 - x0)
    if x > x1:
        return y1 + max(slope, 0.0) * (x - x1)
    return y0 + slope * (x - x0)


def clamped_linear(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """The polyline through ``(xs, ys)`` at ``x``: ``ys[0]`` up to ``xs[0]``, beyond the last
    point the last segment with its slope floored at zero."""
    if len(xs) == 1 or x <= xs[0]:
        return ys[0]
    i = _segment(xs, x)
    return _line(xs[i], ys[i], xs[i + 1], ys[i + 1], x)


def _table_time_ms(table: StepTimeTable, num_tokens: float, kv_read_tokens: float) -> float:
    """Bilinear inside the grid, clamped-linear outside (see ``TableCostConfig``)."""
    ks, rows = table.kv_read_tokens, table.times_ms
    if len(ks) == 1 or kv_read_tokens <= ks[0]:
        return clamped_linear(table.num_tokens, rows[0], num_tokens)
    j = _segment(ks, kv_read_tokens)
    low = clamped_linear(table.num_tokens, rows[j], num_tokens)
    high = clamped_linear(table.num_tokens, rows[j + 1], num_tokens)
    return _line(ks[j], low, ks[j + 1], high, kv_read_tokens)


class TableCostModel(BlockTransfers):
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
            raise empty_step(work)
        return _table_time_ms(self._table, tokens, work.kv_read_tokens) * 1e-3
