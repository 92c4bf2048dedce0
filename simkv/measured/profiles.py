"""Measured kernel times of one decoder layer: LLMServingSim's vLLM layer profiles, read.

A profile folder (``<hardware>/<org>/<model>/<dtype>/tp<N>/``, as bundled under
``traces/measured/llmservingsim-profiles``) holds the times vLLM's kernels took on a real GPU,
one decoder layer at a time, the weights sharded for tensor-parallel degree N:

* ``dense.csv`` — ``layer, tokens, time_us``: each kernel (``qkv_proj``, ``o_proj``,
  ``gate_up_proj``, ``down_proj``, and the elementwise ones) at each token count;
* ``moe.csv`` — ``tokens, activated_experts, time_us``: the routed-expert block of a mixture of
  experts, by how many of its experts the tokens activate;
* ``attention.csv`` — ``prefill_chunk, kv_prefill, n_decode, kv_decode, time_us``: the attention
  layer on a batch of at most one prefill (``prefill_chunk`` new tokens after ``kv_prefill``
  cached ones) and ``n_decode`` decodes (one new token after ``kv_decode`` cached ones each).

:func:`linear_kernel_us` sums a layer's linear kernels at each token count,
:func:`moe_kernel_us` and :func:`attention_kernel_us` give the other two files' rows; every
problem is an :class:`~simkv.errors.InputError` with the file, line and column.
:mod:`simkv.calibrate.kernels` prices the same layer with simkv's roofline and fits its knobs
to these times.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simkv.errors import InputError
from simkv.tables import read_table

__all__ = ["LINEAR_KERNELS", "attention_kernel_us", "linear_kernel_us", "moe_kernel_us"]

LINEAR_KERNELS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
"""The matmuls of a dense decoder layer (a mixture of experts has only the first two in
``dense.csv``; its experts are in ``moe.csv``)."""


def linear_kernel_us(path: Path) -> dict[int, float]:
    """Token count → µs of the layer's :data:`LINEAR_KERNELS` together, from a ``dense.csv``;
    every token count must have all four."""
    table = read_table(path)
    tokens = table.numbers("tokens", minimum=1, integer=True)
    times = table.numbers("time_us", minimum=0, integer=False)
    names = table.column("layer").astype(str).to_numpy()
    by_tokens: dict[int, dict[str, float]] = {}
    for name, count, time in zip(names, tokens, times, strict=True):
        if name in LINEAR_KERNELS:
            by_tokens.setdefault(int(count), {})[name] = float(time)
    for count, kernels in sorted(by_tokens.items()):
        missing = [name for name in LINEAR_KERNELS if name not in kernels]
        if missing:
            raise InputError(f"no {missing[0]} time at {count} tokens", file=path, field="layer")
    if not by_tokens:
        raise InputError(f"no {LINEAR_KERNELS[0]} rows", file=path, field="layer")
    return {count: sum(kernels.values()) for count, kernels in sorted(by_tokens.items())}


def moe_kernel_us(path: Path) -> np.ndarray:
    """Rows ``(tokens, activated experts, µs)`` of a ``moe.csv``, in file order."""
    table = read_table(path)
    return np.column_stack([
        table.numbers("tokens", minimum=1, integer=True),
        table.numbers("activated_experts", minimum=1, integer=True),
        table.numbers("time_us", minimum=0, integer=False),
    ])  # fmt: skip


def attention_kernel_us(path: Path) -> np.ndarray:
    """Rows ``(prefill_chunk, kv_prefill, n_decode, kv_decode, µs)`` of an ``attention.csv``,
    in file order; every row has a prefill chunk or a decode."""
    table = read_table(path)
    names = ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode")
    shape = np.column_stack([table.numbers(name, minimum=0, integer=True) for name in names])
    empty = np.flatnonzero((shape[:, 0] == 0) & (shape[:, 2] == 0))
    if len(empty):
        raise table.fail(int(empty[0]), "prefill_chunk", "no prefill chunk and no decode")
    return np.column_stack([shape, table.numbers("time_us", minimum=0, integer=False)])
