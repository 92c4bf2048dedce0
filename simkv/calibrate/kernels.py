"""simkv's roofline against measured kernel times of one decoder layer, and its linear and
attention knobs fitted to them.

The times are LLMServingSim's vLLM layer profiles (:mod:`simkv.measured.profiles` reads them);
they are what simkv's linear and attention terms are checked against
(``benchmarks/sim_vs_real.py``, kernel level): :func:`attention_work` is the step an attention
shape stands for, and :func:`decoder_layer` turns a model preset into a one-layer model whose
roofline (:meth:`~simkv.engine.cost_model.RooflineCostModel.linear_s`,
:meth:`~simkv.engine.cost_model.RooflineCostModel.attention_s`) prices exactly that layer.
:func:`fit_linear` fits the roofline's linear knobs to ``dense.csv`` profiles and
:func:`fit_attention` its attention knobs to ``attention.csv`` grids: they are where those
defaults come from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simkv.calibrate.fit import fit_log_ratios
from simkv.config.cost import RooflineCostConfig
from simkv.config.hardware import GpuSpec, ModelSpec
from simkv.engine.cost_model import RooflineCostModel
from simkv.engine.step_work import StepWork, chunk_attention_pairs
from simkv.measured.profiles import attention_kernel_us, linear_kernel_us

__all__ = [
    "ATTENTION_KNOBS",
    "LINEAR_KNOBS",
    "AttentionGrid",
    "LinearProfile",
    "attention_us",
    "attention_work",
    "attention_works",
    "decoder_layer",
    "fit_attention",
    "fit_linear",
    "linear_us",
]


def attention_work(prefill_chunk: int, kv_prefill: int, n_decode: int, kv_decode: int) -> StepWork:
    """The step an ``attention.csv`` shape stands for: a prefill chunk after ``kv_prefill``
    cached tokens (its attention pairs, and the cached KV it reads) beside ``n_decode`` decodes
    that each read ``kv_decode`` cached tokens and their own new one."""
    prefill = prefill_chunk > 0
    return StepWork(
        prefill_tokens=prefill_chunk,
        decode_tokens=n_decode,
        attention_pairs=chunk_attention_pairs(prefill_chunk, kv_prefill) if prefill else 0,
        kv_read_tokens=(kv_prefill if prefill else 0) + n_decode * (kv_decode + 1),
        num_seqs=int(prefill) + n_decode,
        prefill_kv_tokens=kv_prefill if prefill else 0,
    )


def decoder_layer(model: ModelSpec, *, experts_only: bool = False) -> ModelSpec:
    """One decoder layer of ``model`` as a model of its own, so that the roofline's linear term
    prices that layer: one layer, a one-token vocabulary with tied embeddings (no LM head to
    speak of: it costs one ``hidden``-wide vector), and the layer's share of the non-embedding
    parameters. ``experts_only`` keeps just the routed experts of a mixture of experts (what a
    ``moe.csv`` measures), beside a one-vector dense part."""
    layers = model.num_layers
    if experts_only:
        if not model.is_moe:
            raise ValueError(f"{model.name} has no experts")
        kept = model.expert_parameters // layers + model.hidden_size
    else:
        kept = model.num_parameters_nonembedding // layers
    update = {"name": f"{model.name} (one layer)", "num_layers": 1, "vocab_size": 1,
              "tie_word_embeddings": True, "num_parameters": kept + model.hidden_size}  # fmt: skip
    return model.model_copy(update=update)


@dataclass(frozen=True)
class AttentionGrid:
    """One ``attention.csv`` with the GPU and model it was measured on (tp 1)."""

    path: Path
    gpu: GpuSpec
    model: ModelSpec


def attention_works(rows: np.ndarray) -> list[StepWork]:
    """The step each row of :func:`~simkv.measured.profiles.attention_kernel_us` stands for
    (:func:`attention_work`)."""
    return [attention_work(*map(int, row[:4])) for row in rows]


def attention_us(
    cfg: RooflineCostConfig, grid: AttentionGrid, works: Sequence[StepWork]
) -> np.ndarray:
    """simkv's attention term (:meth:`~simkv.engine.cost_model.RooflineCostModel.attention_s`)
    for one layer of ``grid.model`` on ``grid.gpu`` at tp 1, in µs, for each of ``works``."""
    layer = RooflineCostModel(cfg, decoder_layer(grid.model), grid.gpu, tensor_parallel=1,
                              block_size=16)  # fmt: skip
    return np.array([layer.attention_s(work) * 1e6 for work in works])


@dataclass(frozen=True)
class LinearProfile:
    """One dense model's ``dense.csv`` with the GPU it was measured on and the tensor-parallel
    degree its weights were sharded for."""

    path: Path
    gpu: GpuSpec
    model: ModelSpec
    tensor_parallel: int


def linear_us(cfg: RooflineCostConfig, profile: LinearProfile, tokens: Sequence[int]) -> np.ndarray:
    """simkv's linear term (:meth:`~simkv.engine.cost_model.RooflineCostModel.linear_s`) for
    one layer of ``profile.model`` on ``profile.gpu``, in µs, at each of ``tokens``."""
    layer = RooflineCostModel(cfg, decoder_layer(profile.model), profile.gpu,
                              tensor_parallel=profile.tensor_parallel, block_size=16)  # fmt: skip
    return np.array([layer.linear_s(n, 0) * 1e6 for n in tokens])


LINEAR_KNOBS = ("gemm_efficiency", "linear_overlap_exponent")
"""What :func:`fit_linear` fits. The weight-read efficiency keeps its value: the few-token
shapes, bound by the weight stream, confirm it (within 6 %), and fitted with these two it
moves by under 2 %."""


def fit_linear(profiles: Sequence[LinearProfile], start: RooflineCostConfig) -> RooflineCostConfig:
    """``start`` with :data:`LINEAR_KNOBS` fitted to the pooled ``profiles`` (least squares on
    the log of simkv's linear term for one layer over the measured matmuls,
    :func:`~simkv.measured.profiles.linear_kernel_us`, at every token count). Deterministic."""
    measured = [(profile, linear_kernel_us(profile.path)) for profile in profiles]
    times = np.concatenate([list(us.values()) for _, us in measured])

    def predict_us(trial: RooflineCostConfig) -> np.ndarray:
        return np.concatenate([linear_us(trial, profile, list(us)) for profile, us in measured])

    return _fit_knobs(start, LINEAR_KNOBS, predict_us, times)


_Picked = tuple[AttentionGrid, list[StepWork], np.ndarray]
"""A grid, the attention shapes of one fit stage taken from it, and their measured µs."""


ATTENTION_KNOBS = (
    ("attention_floor_us", "kv_read_efficiency"),
    ("attention_efficiency",),
    ("mixed_gqa_reread",),
)
"""What :func:`fit_attention` fits, in order, and on which shapes: decode-only, then
prefill-only, then mixed (each stage keeps what the earlier ones found)."""


def fit_attention(grids: Sequence[AttentionGrid], start: RooflineCostConfig) -> RooflineCostConfig:
    """``start`` with its attention knobs fitted to the pooled ``grids`` (least squares on the
    log of simkv's :meth:`~simkv.engine.cost_model.RooflineCostModel.attention_s` for one
    layer over the measured time): the call floor and the KV-read efficiency on the decode-only
    shapes, the attention efficiency on the prefill-only ones, the mixed-step re-read share on
    the shapes with both. Deterministic (scipy's trust-region solver from ``start``)."""
    shapes = []
    for grid in grids:
        rows = attention_kernel_us(grid.path)
        shapes.append((grid, attention_works(rows), rows[:, 4], rows[:, 0] > 0, rows[:, 2] > 0))
    cfg = start
    for stage, knobs in zip(("decode", "prefill", "mixed"), ATTENTION_KNOBS, strict=True):
        picked: list[_Picked] = []
        for grid, works, us, prefill, decode in shapes:
            keep = {"decode": ~prefill, "prefill": ~decode, "mixed": prefill & decode}[stage]
            picked.append((grid, [w for w, k in zip(works, keep, strict=True) if k], us[keep]))
        measured = np.concatenate([us for _, _, us in picked])

        def predict_us(trial: RooflineCostConfig, picked: list[_Picked] = picked) -> np.ndarray:
            return np.concatenate([attention_us(trial, grid, works) for grid, works, _ in picked])

        cfg = _fit_knobs(cfg, knobs, predict_us, measured)
    return cfg


def _fit_knobs(
    cfg: RooflineCostConfig,
    knobs: tuple[str, ...],
    predict_us: Callable[[RooflineCostConfig], np.ndarray],
    measured_us: np.ndarray,
) -> RooflineCostConfig:
    """``cfg`` with ``knobs`` fitted to ``measured_us`` by the calibration's least squares on
    log ratios (:func:`~simkv.calibrate.fit.fit_log_ratios`), without its prior."""
    return fit_log_ratios(cfg, knobs, predict_us, measured_us, prior=False)[0]
