"""The cost model a config describes: the one place that picks a model for a ``cost_model:``.

``kind: roofline`` → :class:`~simkv.engine.cost_model.RooflineCostModel`; ``kind: table`` →
:class:`~simkv.engine.table_cost.TableCostModel` for simkv's step-time CSV, or
:class:`~simkv.engine.phase_cost.PhaseCostModel` for a DistServe profile or a Splitwise table
(detected from the file, :func:`simkv.measured.step_sources.sniff`).
"""

from __future__ import annotations

from pathlib import Path

from simkv.config.cost import CostConfig, RooflineCostConfig
from simkv.config.hardware import GpuSpec, ModelSpec
from simkv.engine.cost_model import RooflineCostModel
from simkv.engine.phase_cost import phase_cost_model
from simkv.engine.step_work import CostModel
from simkv.engine.table_cost import TableCostModel
from simkv.measured.step_sources import sniff
from simkv.measured.step_table import read_step_table

__all__ = ["build_cost_model"]


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
    path = cfg.path if cfg.path.is_absolute() else base_dir / cfg.path
    kind = sniff(path) if path.is_file() else None
    if kind in ("distserve", "splitwise"):
        return phase_cost_model(cfg, path, kind, model, gpu, tensor_parallel=tensor_parallel,
                                block_size=block_size)  # fmt: skip
    table = read_step_table(path)
    return TableCostModel(
        cfg, model, gpu, tensor_parallel=tensor_parallel, block_size=block_size, table=table
    )
