"""Cost-model configuration: the one place where performance constants live.

``cost: {kind: roofline, ...}`` or ``cost: {kind: table, path: steps.csv, ...}``; the ``kind``
key selects the model (a pydantic discriminated union, :data:`CostConfig`). Both kinds share the
block-transfer parameters of :class:`TransferCostConfig` (swap and copy-on-write times), so those
are written once. A table's CSV is read and checked into a typed
:class:`~simkv.measured.step_table.StepTimeTable` by :mod:`simkv.measured.step_table`; the
models themselves are in :mod:`simkv.engine.cost_model`.

The defaults are modelling assumptions, not measurements; calibrate them (or use ``table``) when
absolute times matter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from simkv.config.base import Frozen
from simkv.config.hardware import GpuSpec
from simkv.config.host_eras import HostEra, era_defaults
from simkv.config.limits import MIN_EFFICIENCY, ClockMhz, LatencyUs, OverheadMs
from simkv.errors import InputError

Efficiency = Annotated[
    float, Field(ge=MIN_EFFICIENCY, le=4.0, description=f"fraction, {MIN_EFFICIENCY:g}..4")
]
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
    swap_copy_latency_us: LatencyUs = 5.0


class RooflineCostConfig(TransferCostConfig):
    """Analytic step time: a sum of phases, each at its own bottleneck (see
    :class:`simkv.engine.cost_model.RooflineCostModel` for the formula).

    Overheads (the host side of a step: scheduling, input preparation, sampling, launches):

    * ``step_overhead_ms``: fixed per engine step;
    * ``seq_overhead_ms``: per sequence in the batch (input metadata, sampling, detokenising);
    * ``worker_overhead_ms``: per tensor-parallel worker beyond the first (handing it the step);
    * ``prefill_overhead_ms``: per sequence that computes a prefill chunk in the step;
    * ``output_token_overhead_ms``: per decode token the step emits (sampling it,
      detokenising it, checking stop strings: vLLM's output processing);
    * ``queued_request_overhead_ms``: per request left in the waiting queue when the step
      launches (a scheduler whose pass grows with its queue).

    ``host_era`` picks their defaults by engine generation (:mod:`simkv.config.host_eras`; a
    host field the config sets wins); no host term depends on the GPU.

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

    Another GPU (``latency_clock_mhz``): the attention floor, the all-reduce call latency
    and the hop latencies are fixed costs of small kernels, bound by launch and
    synchronisation, which run at the SM clock; when set, they are taken as measured at that
    clock and scaled by ``latency_clock_mhz / gpu.boost_clock_mhz`` (:func:`latency_scale`).
    ``simkv calibrate`` records the clock of the GPU it fitted on, so a fit carries to
    another board by its spec alone (docs/fidelity.md, "One GPU predicts the next").

    Small blocks: the KV-read bandwidth is further scaled by
    ``min(1, block_size / attention_block_size_knee) ** small_block_attention_penalty``; with the
    defaults (knee 16, penalty 0.5) block 4 reads at half speed and block 1 at a quarter.

    Each field's description (``simkv schema``) says where its default comes from. The GEMM
    and attention efficiencies are fractions of the GPU's tensor rate: its measured sustained
    BF16 GEMM rate where the preset has one, else its spec peak
    (:attr:`~simkv.config.hardware.GpuSpec.tensor_flops_per_s`). Two groups of defaults are
    fitted to measurements, the GPU side first. The two linear knobs (``gemm_efficiency``,
    ``linear_overlap_exponent``) come from vLLM 0.19's matmuls of one decoder layer measured at
    1-2,048 tokens on an RTX 4090 and an RTX PRO 6000 (:func:`simkv.calibrate.kernels.fit_linear`
    on the ``dense.csv`` profiles bundled under ``traces/measured/llmservingsim-profiles``), the
    four attention knobs (``attention_floor_us``, ``kv_read_efficiency``,
    ``attention_efficiency``, ``mixed_gqa_reread``) from its attention layer measured shape by
    shape on the same GPUs (:func:`simkv.calibrate.kernels.fit_attention` on the
    ``attention.csv`` grids there); ``benchmarks/sim_vs_real.py`` prints both fits.
    Then the two host overheads (``host_era: vllm-v1``), jointly to the two vLLM 0.19
    Llama-3.1-8B runs bundled under ``traces/measured`` (an RTX 4090 and an RTX PRO 6000 Server
    Edition), every other knob at its
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
    host_era: HostEra = Field(
        "auto",
        description="engine generation whose host-overhead defaults apply "
        "(simkv.config.host_eras.HOST_ERAS, docs/cost-model.md): vllm-v1 (vLLM 0.19 fit), "
        "vllm-0.6 (vLLM's v0.6.0 blog profile), vllm-0.2-0.4 (DistServe's A100 profile); "
        "overhead fields set in the config win; auto = the scheduler's: vllm_v0 with "
        "vllm_version 0.4 or 0.6 that era, else vllm-v1",
    )
    step_overhead_ms: OverheadMs = Field(
        0.52,
        description="ms per step; default (host_era vllm-v1): vLLM 0.19's bundled "
        "Llama-3.1-8B runs (traces/measured, joint fit of the two host overheads: 0.524 ms); "
        "vllm-0.6: 3.8, vllm-0.2-0.4: 8.0 (simkv.config.host_eras)",
    )
    seq_overhead_ms: OverheadMs = Field(
        0.0056,
        description="ms per sequence per step; default (vllm-v1): the same joint fit "
        "(0.00560 ms); vllm-0.2-0.4: 0.020 (DistServe's A100 profile)",
    )
    worker_overhead_ms: OverheadMs = Field(
        0.0,
        description="ms per step per tensor-parallel worker beyond the first: the engine "
        "handing each worker its step (the 2023-era vLLM made one Ray call per worker per "
        "step); default 0 (not identifiable in the bundled tp-1 runs); vllm-0.2-0.4: 2.0",
    )
    prefill_overhead_ms: OverheadMs = Field(
        0.0,
        description="ms per prefilling sequence per step; default 0 (not identifiable in "
        "the bundled runs); vllm-0.2-0.4: 1.47",
    )
    output_token_overhead_ms: OverheadMs = Field(
        0.0,
        description="ms per decode token a step emits (sampling, detokenising, stop checks); "
        "default 0 in every era (no bundled measurement separates it from seq_overhead_ms)",
    )
    queued_request_overhead_ms: OverheadMs = Field(
        0.0,
        description="ms per request in the waiting queue when a step launches (scheduling "
        "that grows with the queue); default 0 in every era (no bundled measurement has it)",
    )
    gemm_efficiency: Efficiency = Field(
        0.98,
        description="fraction of the GPU's tensor rate (measured sustained GEMM rate, else "
        "spec peak) in the linear layers; default: vLLM 0.19's linear kernels of one decoder "
        "layer at 1-2,048 tokens on an RTX 4090 and an RTX PRO 6000, TP 1 and 2 "
        "(simkv.calibrate.kernels.fit_linear on traces/measured/llmservingsim-profiles: 0.983)",
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
        "(simkv.calibrate.kernels.fit_attention on traces/measured/llmservingsim-profiles: "
        "0.863)",
    )
    attention_floor_us: LatencyUs = Field(
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
    allreduce_latency_us: LatencyUs = Field(
        10.0,
        description="fixed µs per all-reduce call (launch); default: NCCL's small-message floor",
    )
    nvlink_hop_latency_us: LatencyUs = Field(
        2.0,
        description="µs per ring step over NVLink; default: NCCL's small-message all-reduce "
        "over NVLink, ~15-40 µs at tp 2-8",
    )
    pcie_hop_latency_us: LatencyUs = Field(
        70.0,
        description="µs per ring step over PCIe; default: ≈ 150 µs per all-reduce at "
        "tp 2 over PCIe",
    )
    interconnect_efficiency: Efficiency = Field(
        0.7, description="fraction of link bandwidth an all-reduce reaches (NCCL bus bandwidth)"
    )
    latency_clock_mhz: ClockMhz | None = Field(
        None,
        description="SM clock the fixed kernel latencies (attention floor, all-reduce call and "
        "hop latencies) were measured at: on a GPU of another boost_clock_mhz they scale by "
        "this / gpu.boost_clock_mhz; simkv calibrate sets it to the fitted GPU's clock; "
        "default None: the latencies as given, on every GPU",
    )
    attention_block_size_knee: int = Field(
        16, ge=1, le=4096, description="block size from which attention reads KV at full speed, "
        "1..4096",
    )  # fmt: skip
    small_block_attention_penalty: float = Field(
        0.5, ge=0, le=4, description="exponent of the small-block KV-read slowdown (0 = off), 0..4"
    )

    @model_validator(mode="before")
    @classmethod
    def _era_defaults(cls, data: object) -> object:
        """An explicit ``host_era`` fills the host fields the section leaves out
        (:func:`~simkv.config.host_eras.era_defaults`); ``auto`` is resolved by the run config,
        which knows the scheduler."""
        return era_defaults(data)


class UnknownClock(InputError):
    """A cost config scales its latencies by clock (``latency_clock_mhz``) on a GPU whose
    clock is unknown (``boost_clock_mhz`` None)."""

    def __init__(self, gpu: GpuSpec) -> None:
        super().__init__(
            f"cost_model.latency_clock_mhz needs the GPU's clock: gpu {gpu.name!r} has no "
            "boost_clock_mhz (give it, or unset latency_clock_mhz)",
            field="gpu.boost_clock_mhz",
        )


def latency_scale(cfg: RooflineCostConfig, gpu: GpuSpec) -> float:
    """The factor on ``cfg``'s fixed kernel latencies on ``gpu``: ``latency_clock_mhz /
    gpu.boost_clock_mhz`` (a kernel bound by launch and synchronisation takes a number of SM
    cycles), 1 when ``latency_clock_mhz`` is unset; :class:`UnknownClock` when it is set and
    the GPU's clock is not."""
    if cfg.latency_clock_mhz is None:
        return 1.0
    if gpu.boost_clock_mhz is None:
        raise UnknownClock(gpu)
    return cfg.latency_clock_mhz / gpu.boost_clock_mhz


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


CostConfig = Annotated[RooflineCostConfig | TableCostConfig, Field(discriminator="kind")]
"""Either cost-model configuration, selected by its ``kind`` key."""
