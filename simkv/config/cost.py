"""Cost-model configuration: the one place where performance constants live.

``cost: {kind: roofline, ...}`` or ``cost: {kind: table, path: steps.csv, ...}``; the ``kind``
key selects the model (a pydantic discriminated union, :data:`CostConfig`). Both kinds share the
block-transfer parameters of :class:`TransferCostConfig` (swap and copy-on-write times), so those
are written once. A table's CSV is user input, so it is read and checked here, into a typed
:class:`StepTimeTable`; the models themselves are in :mod:`simkv.engine.cost_model`.

The defaults are modelling assumptions, not measurements; calibrate them (or use ``table``) when
absolute times matter.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, NonNegativeFloat, PositiveInt

from simkv.config.base import Frozen
from simkv.config.safe_yaml import decode_utf8
from simkv.errors import InputError

Efficiency = Annotated[float, Field(gt=0.0, le=4.0)]
"""A fraction of a spec-sheet rate reached in practice. Above 1 is allowed (up to 4) because
spec sheets sometimes understate what kernels reach (e.g. FP16-accumulate tensor rates on
GeForce boards, or a calibration absorbing a term the model lacks); a calibration reports it."""


class TransferCostConfig(Frozen):
    """Block-transfer parameters shared by every cost model.

    * ``memory_efficiency``: fraction of nominal HBM bandwidth reached by bulk reads/writes
      (GPU→GPU block copies and, in the roofline, writing the new tokens' KV).
    * ``host_link_efficiency``: fraction of the nominal GPU↔CPU link bandwidth reached by a swap.
    * ``swap_copy_latency_us``: fixed cost of one GPU↔CPU copy call. Swapping a block makes
      ``2 · num_layers`` of them (its K and its V in every layer's cache, one copy each, as vLLM
      v0's cache engine does), which is what makes swapping expensive when blocks are small.
    """

    memory_efficiency: Efficiency = 0.8
    host_link_efficiency: Efficiency = 0.8
    swap_copy_latency_us: NonNegativeFloat = 5.0


class RooflineCostConfig(TransferCostConfig):
    """Analytic step time: a sum of phases, each at its own bottleneck (see
    :class:`simkv.engine.cost_model.RooflineCostModel` for the formula).

    Overheads (the host side of a step: scheduling, input preparation, sampling, launches):

    * ``step_overhead_ms``: fixed per engine step;
    * ``seq_overhead_ms``: per sequence in the batch (input metadata, sampling, detokenising);
    * ``worker_overhead_ms``: per tensor-parallel worker beyond the first (handing it the step);
    * ``prefill_overhead_ms``: per sequence that computes a prefill chunk in the step.

    Efficiencies (fractions of the GPU's tensor rate or HBM bandwidth, :data:`Efficiency`):

    * ``gemm_efficiency``: tensor-core FLOP/s reached by the linear layers;
    * ``linear_overlap_exponent``: how the linear layers' FLOP time and weight-stream time
      combine (their p-norm: 1 adds them, 64 is practically the larger of the two);
    * ``weight_read_efficiency``: HBM bandwidth reached streaming the weights;
    * ``kv_read_efficiency``: HBM bandwidth reached by attention reading the KV cache;
    * ``attention_efficiency``: tensor-core FLOP/s reached by prefill attention.

    Attention beyond bytes and FLOPs:

    * ``attention_floor_us``: per layer per step, what one attention call costs at any size;
    * ``mixed_gqa_reread``: on GPUs where vLLM runs FlashAttention 2, the share of a
      grouped-query model's extra KV reads that reach HBM when decodes share a step with a
      prefill (:class:`simkv.engine.cost_model.RooflineCostModel` says why).

    Tensor parallelism (two all-reduces per layer when tp > 1, ring algorithm):

    * ``allreduce_latency_us``: fixed cost of one all-reduce call;
    * ``nvlink_hop_latency_us`` / ``pcie_hop_latency_us``: latency of each of the ring's
      ``2(tp − 1)`` steps over the GPU's ``interconnect`` kind;
    * ``interconnect_efficiency``: fraction of the nominal link bandwidth an all-reduce reaches.

    Small blocks: the KV-read bandwidth is further scaled by
    ``min(1, block_size / attention_block_size_knee) ** small_block_attention_penalty``; with the
    defaults (knee 16, penalty 0.5) block 4 reads at half speed and block 1 at a quarter.

    Each field's description (``simkv schema``) says where its default comes from. The GEMM
    and attention efficiencies are fractions of the GPU's tensor rate: its measured sustained
    BF16 GEMM rate where the preset has one, else its spec peak
    (:attr:`~simkv.config.hardware.GpuSpec.tensor_flops_per_s`). Two groups of defaults are
    fitted to measurements, the GPU side first. The two linear knobs (``gemm_efficiency``,
    ``linear_overlap_exponent``) come from vLLM 0.19's matmuls of one decoder layer measured at
    1-2,048 tokens on an RTX 4090 and an RTX PRO 6000 (:func:`simkv.measured.profiles.fit_linear`
    on the ``dense.csv`` profiles bundled under ``traces/measured/llmservingsim-profiles``), the
    four attention knobs (``attention_floor_us``, ``kv_read_efficiency``,
    ``attention_efficiency``, ``mixed_gqa_reread``) from its attention layer measured shape by
    shape on the same GPUs (:func:`simkv.measured.profiles.fit_attention` on the
    ``attention.csv`` grids there); ``benchmarks/sim_vs_real.py`` prints both fits.
    Then the two host overheads, jointly to the two vLLM 0.19 Llama-3.1-8B runs bundled under
    ``traces/measured`` (an RTX 4090 and an RTX PRO 6000 Server Edition), every other knob at its
    default, from round values chosen before either run was seen
    (``configs/measured/profiles/host_prior.yaml``: 1 ms and 0.02 ms)::

        simkv calibrate traces/measured/llmservingsim-vllm0.19/RTX4090_Llama-3.1-8B \
            traces/measured/llmservingsim-vllm0.19/RTXPRO6000_Llama-3.1-8B \
            --config configs/measured/rtx4090_llama31_8b.yaml \
            --config configs/measured/rtxpro6000_llama31_8b.yaml \
            --fit step_overhead_ms,seq_overhead_ms \
            --start configs/measured/profiles/host_prior.yaml

    (0.524 ms and 0.00560 ms; at the rounded defaults, mean abs. error 0.2 % on the RTX 4090
    run and 1.8 % on the RTX PRO 6000 run). The
    bundled Qwen3-32B run (TP 2) was left out of both fits, so simkv's error on it is a
    prediction. ``simkv calibrate`` fits any knob to other measurements.
    """

    kind: Literal["roofline"] = "roofline"
    step_overhead_ms: NonNegativeFloat = Field(
        0.52,
        description="ms per step; default: vLLM 0.19's bundled Llama-3.1-8B runs "
        "(traces/measured, joint fit of the two host overheads: 0.524 ms)",
    )
    seq_overhead_ms: NonNegativeFloat = Field(
        0.0056,
        description="ms per sequence per step; default: the same joint fit (0.00560 ms; "
        "the 2023-era vLLM of DistServe's profile: 0.02-0.12 ms)",
    )
    worker_overhead_ms: NonNegativeFloat = Field(
        0.0,
        description="ms per step per tensor-parallel worker beyond the first: the engine "
        "handing each worker its step (the 2023-era vLLM made one Ray call per worker per "
        "step); default 0 (not identifiable in the bundled tp-1 runs)",
    )
    prefill_overhead_ms: NonNegativeFloat = Field(
        0.0,
        description="ms per prefilling sequence per step; default 0 (not identifiable in "
        "the bundled runs)",
    )
    gemm_efficiency: Efficiency = Field(
        0.98,
        description="fraction of the GPU's tensor rate (measured sustained GEMM rate, else "
        "spec peak) in the linear layers; default: vLLM 0.19's linear kernels of one decoder "
        "layer at 1-2,048 tokens on an RTX 4090 and an RTX PRO 6000, TP 1 and 2 "
        "(simkv.measured.profiles.fit_linear on traces/measured/llmservingsim-profiles: 0.983)",
    )
    linear_overlap_exponent: float = Field(
        1.45,
        ge=1.0,
        le=64.0,
        description="how far a linear layer overlaps its FLOPs with its weight stream: its time "
        "is the p-norm of the two times, (gemm^p + stream^p)^(1/p); 64 is the classic "
        "roofline's max (full overlap), 1 their sum (none); default: the same fit (1.451)",
    )
    weight_read_efficiency: Efficiency = Field(
        0.9,
        description="fraction of HBM bandwidth streaming weights; default: what "
        "bandwidth-bound GEMV kernels reach",
    )
    kv_read_efficiency: Efficiency = Field(
        0.86,
        description="fraction of HBM bandwidth attention reads KV at; default: vLLM 0.19's "
        "attention layer on an RTX 4090 and an RTX PRO 6000, decode-only shapes "
        "(simkv.measured.profiles.fit_attention on traces/measured/llmservingsim-profiles: "
        "0.863)",
    )
    attention_floor_us: NonNegativeFloat = Field(
        13.3,
        description="µs per layer per step an attention call takes before its bytes and FLOPs "
        "(launch, first wave); default: the same fit (13.34 µs)",
    )
    attention_efficiency: Efficiency = Field(
        0.52,
        description="fraction of the GPU's tensor rate in prefill attention; default: the same "
        "fit, prefill-only shapes (0.516; FlashAttention-2's forward pass reaches 50-73 % of "
        "A100 peak, Dao 2023)",
    )
    mixed_gqa_reread: float = Field(
        0.39,
        ge=0.0,
        le=1.0,
        description="GPUs where vLLM runs FlashAttention 2 only: beside a prefill, each decode "
        "reads its KV once per query head instead of once per KV head; the share of those "
        "group − 1 extra reads that reach HBM (the rest hit L2); default: the same fit, mixed "
        "shapes (0.394)",
    )
    allreduce_latency_us: NonNegativeFloat = Field(
        10.0,
        description="fixed µs per all-reduce call (launch); default: NCCL's small-message floor",
    )
    nvlink_hop_latency_us: NonNegativeFloat = Field(
        2.0,
        description="µs per ring step over NVLink; default: NCCL's small-message all-reduce "
        "over NVLink, ~15-40 µs at tp 2-8",
    )
    pcie_hop_latency_us: NonNegativeFloat = Field(
        70.0,
        description="µs per ring step over PCIe; default: ≈ 150 µs per all-reduce at "
        "tp 2 over PCIe",
    )
    interconnect_efficiency: Efficiency = Field(
        0.7, description="fraction of link bandwidth an all-reduce reaches (NCCL bus bandwidth)"
    )
    attention_block_size_knee: PositiveInt = Field(
        16, description="block size from which attention reads KV at full speed"
    )
    small_block_attention_penalty: NonNegativeFloat = Field(
        0.5, description="exponent of the small-block KV-read slowdown (0 = off)"
    )


class TableCostConfig(TransferCostConfig):
    """Step times interpolated from measurements in a CSV file.

    ``path`` (relative paths resolve against the config file's folder) has a header row and the
    columns ``num_tokens`` (prefill + decode tokens of the step), ``step_time_ms`` and optionally
    ``kv_read_tokens``; no other columns. Without ``kv_read_tokens`` the time is piecewise-linear
    in ``num_tokens`` (one row per distinct value). With it, the rows must cover a full grid
    (every ``num_tokens`` value with every ``kv_read_tokens`` value, once) and the time is
    bilinear inside each grid cell. Outside the measured range each axis is *clamped-linear*:
    below the smallest value the time stays at the edge value; above the largest value the last
    segment's slope continues, floored at zero so an extrapolated time never decreases.

    ``path`` may instead be a published per-phase measurement of the shapes bundled under
    ``traces/measured/``: a DistServe profile (JSON) or a Splitwise table (CSV); then the run's
    model (or ``model``) at the run's tensor-parallel degree prices each step
    (:mod:`simkv.engine.phase_cost`).
    """

    kind: Literal["table"] = "table"
    path: Path
    model: str | None = Field(
        None,
        description="a DistServe profile or Splitwise table only: the model's name in the file "
        "(None: the run's model preset, matched through its aliases)",
    )


# ---------------------------------------------------------------------------------------------
# The measured table, read and checked at the edge into a typed object

_TOKENS, _KV, _TIME = "num_tokens", "kv_read_tokens", "step_time_ms"


@dataclass(frozen=True, slots=True)
class StepTimeTable:
    """Measured step times on a grid: ``times_ms[j][i]`` at ``(num_tokens[i], kv_read[j])``.

    Invariants: both axes strictly increasing and non-empty; every time positive. A table
    without a ``kv_read_tokens`` column has the single kv axis value 0 (the axis is then inert).
    """

    num_tokens: tuple[float, ...]
    kv_read_tokens: tuple[float, ...]
    times_ms: tuple[tuple[float, ...], ...]


def _number(text: str, column: str, where: tuple[Path, int]) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    ok = math.isfinite(value) and (value > 0 if column == _TIME else value >= 0)
    if not ok:
        want = "a positive number" if column == _TIME else "a non-negative number"
        raise InputError(
            f"expected {want}, got {text!r}", file=where[0], line=where[1], field=column
        )
    return value


def _header(row: list[str], path: Path) -> list[str]:
    names = [name.strip() for name in row]
    for i, name in enumerate(names):
        if name not in (_TOKENS, _KV, _TIME):
            raise InputError("unknown column", file=path, line=1, field=name or "''")
        if name in names[:i]:
            raise InputError("duplicate column", file=path, line=1, field=name)
    for name in (_TOKENS, _TIME):
        if name not in names:
            raise InputError("missing column", file=path, line=1, field=name)
    return names


def _read_points(path: Path) -> dict[tuple[float, float], float]:
    """``{(num_tokens, kv_read_tokens): step_time_ms}``; kv_read_tokens is 0 without its column."""
    try:
        text = decode_utf8(path.read_bytes(), str(path)).removeprefix("\ufeff")
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", file=path) from None
    with io.StringIO(text, newline="") as handle:
        reader = csv.reader(handle)
        names = _header(next(reader, []), path)
        points: dict[tuple[float, float], float] = {}
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            where = (path, reader.line_num)
            if len(row) != len(names):
                raise InputError(
                    f"expected {len(names)} fields, got {len(row)}", file=path, line=where[1]
                )
            values = {n: _number(c.strip(), n, where) for n, c in zip(names, row, strict=True)}
            key = (values[_TOKENS], values.get(_KV, 0.0))
            if key in points:
                message = f"duplicate row for num_tokens={key[0]:g}, kv_read_tokens={key[1]:g}"
                raise InputError(message, file=path, line=where[1], field=_TOKENS)
            points[key] = values[_TIME]
    if not points:
        raise InputError("no data rows", file=path, line=1)
    return points


def read_step_table(path: Path) -> StepTimeTable:
    """Parse a step-time CSV (format in ``TableCostConfig``); problems are :class:`InputError`."""
    points = _read_points(path)
    ns = tuple(sorted({n for n, _ in points}))
    ks = tuple(sorted({k for _, k in points}))
    for k in ks:
        for n in ns:
            if (n, k) not in points:
                raise InputError(
                    f"incomplete grid: no row for num_tokens={n:g} with kv_read_tokens={k:g}",
                    file=path,
                    field=_KV,
                )
    times = tuple(tuple(points[(n, k)] for n in ns) for k in ks)
    return StepTimeTable(num_tokens=ns, kv_read_tokens=ks, times_ms=times)


CostConfig = Annotated[RooflineCostConfig | TableCostConfig, Field(discriminator="kind")]
"""Either cost-model configuration, selected by its ``kind`` key."""
