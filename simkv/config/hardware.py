"""Model and GPU specifications, written inline or named by preset.

A config field typed :class:`ModelSpec` (or :class:`GpuSpec`) accepts three spellings:

* a preset name: ``model: llama-2-7b``;
* a preset plus overrides: ``model: {preset: llama-2-7b, max_model_len: 8192}``;
* a full inline mapping with every field.

The first two are expanded *before* validation into the preset's full mapping (overrides win), so
a resolved config, once dumped, shows every number that was used. An unknown preset name is a
``ValueError`` listing the known presets, which pydantic reports as a validation error at the
field's location.

Units: bytes for memory, tera-FLOP/s for compute, GB/s (10^9 bytes per second) for bandwidth.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, Self

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from simkv.config.base import Frozen
from simkv.config.limits import (
    MAX_GPU_GIB,
    MAX_PARAMETERS,
    ClockMhz,
    Gbps,
    ModelCount,
    ModelDim,
    Tflops,
    Tokens,
)
from simkv.presets import PresetKind, list_presets, read_preset

DType = Literal["fp16", "bf16", "fp32", "fp8"]

DTYPE_BYTES: Mapping[str, int] = MappingProxyType({"fp16": 2, "bf16": 2, "fp32": 4, "fp8": 1})

Interconnect = Literal["nvlink", "pcie"]

__all__ = [
    "DTYPE_BYTES",
    "DType",
    "GpuSpec",
    "Interconnect",
    "ModelSpec",
    "list_presets",
    "load_gpu_preset",
    "load_model_preset",
]


def _expand_preset(kind: PresetKind, data: Any) -> Any:
    """Replace a preset name, or a ``{preset: name, **overrides}`` mapping, by full data."""
    if isinstance(data, str):
        return read_preset(kind, data)
    if isinstance(data, Mapping) and "preset" in data:
        overrides = {key: value for key, value in data.items() if key != "preset"}
        name = data["preset"]
        if not isinstance(name, str):
            raise ValueError(f"preset must be a name, got {name!r}")
        return {**read_preset(kind, name), **overrides}
    return data


class ModelSpec(Frozen):
    """A decoder-only transformer, as far as memory and FLOPs are concerned.

    Invariants: every count is positive; ``num_attention_heads`` is a multiple of
    ``num_kv_heads`` (grouped-query attention shares each KV head among that many query heads);
    the non-embedding parameter count is positive. ``dtype`` is the storage type of the weights,
    ``kv_dtype`` that of the KV cache (vLLM's ``kv_cache_dtype``; unset = ``dtype``, as vLLM's
    ``auto``), so an fp8 KV cache beside bf16 weights is ``kv_dtype: fp8``.

    Mixture of experts: ``num_experts > 0`` routed experts per layer, each token using
    ``experts_per_token`` of them; an expert is a gated MLP of ``expert_intermediate_size``
    (``3 · hidden · expert_intermediate_size`` parameters). ``num_parameters`` counts every
    expert; the parameters a token runs through are :attr:`active_parameters_nonembedding`.
    A dense model has ``num_experts = experts_per_token = expert_intermediate_size = 0``.
    """

    name: str
    num_layers: ModelDim
    hidden_size: ModelDim
    num_attention_heads: ModelDim
    num_kv_heads: ModelDim
    head_dim: ModelDim
    intermediate_size: ModelDim
    vocab_size: ModelDim
    num_parameters: int = Field(gt=0, le=MAX_PARAMETERS, description="1..10^15")
    dtype: DType
    kv_dtype: DType | None = None
    max_model_len: Tokens
    tie_word_embeddings: bool = False
    num_experts: ModelCount = 0
    experts_per_token: ModelCount = 0
    expert_intermediate_size: ModelCount = 0
    source: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _resolve_preset(cls, data: Any) -> Any:
        data = _expand_preset("models", data)
        if isinstance(data, Mapping) and data.get("kv_dtype") is None and "dtype" in data:
            data = {**data, "kv_dtype": data["dtype"]}  # the resolved config shows the value
        return data

    @model_validator(mode="after")
    def _check_shape(self) -> Self:
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        moe = (self.num_experts, self.experts_per_token, self.expert_intermediate_size)
        if any(moe) and not all(moe):
            raise ValueError(
                "num_experts, experts_per_token and expert_intermediate_size are all > 0 "
                "(mixture of experts) or all 0 (dense)"
            )
        if self.experts_per_token > self.num_experts:
            raise ValueError(
                f"experts_per_token ({self.experts_per_token}) exceeds num_experts "
                f"({self.num_experts})"
            )
        if self.num_parameters_nonembedding - self.expert_parameters <= 0:
            raise ValueError("num_parameters must exceed the embedding and expert parameters")
        return self

    @property
    def dtype_bytes(self) -> int:
        """Bytes per stored weight element (also the activations' width)."""
        return DTYPE_BYTES[self.dtype]

    @property
    def kv_dtype_bytes(self) -> int:
        """Bytes per stored KV-cache element."""
        return DTYPE_BYTES[self.kv_dtype or self.dtype]

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token occupies over all layers: 2·layers·kv_heads·head_dim·kv
        dtype."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.kv_dtype_bytes

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def expert_parameters(self) -> int:
        """Parameters of every routed expert of every layer (0 for a dense model)."""
        per_expert = 3 * self.hidden_size * self.expert_intermediate_size
        return self.num_layers * self.num_experts * per_expert

    @property
    def active_parameters_nonembedding(self) -> int:
        """Non-embedding parameters one token runs through: the dense part plus
        ``experts_per_token`` experts per layer (all of them for a dense model)."""
        if not self.is_moe:
            return self.num_parameters_nonembedding
        active_experts = self.expert_parameters * self.experts_per_token // self.num_experts
        return self.num_parameters_nonembedding - self.expert_parameters + active_experts

    @property
    def gemm_flops_per_token(self) -> int:
        """Matmul FLOPs of one token's forward pass: 2 · active non-embedding parameters (a
        multiply and an add per weight); attention over the KV is not counted."""
        return 2 * self.active_parameters_nonembedding

    @property
    def gemm_flops_per_seq(self) -> int:
        """Matmul FLOPs of the LM head on one sampled position: 2 · vocab · hidden."""
        return 2 * self.vocab_size * self.hidden_size

    @property
    def weight_bytes(self) -> int:
        """Bytes of all weights (whole model, before any tensor-parallel split)."""
        return self.num_parameters * self.dtype_bytes

    @property
    def num_parameters_nonembedding(self) -> int:
        """Parameters whose matmuls run for every token.

        Excludes the input embedding (a lookup, no FLOPs) and, when untied, the LM head, which
        serving engines apply only to the one sampled position of each sequence.
        """
        embedding_tables = 1 if self.tie_word_embeddings else 2
        return self.num_parameters - embedding_tables * self.vocab_size * self.hidden_size


class GpuSpec(Frozen):
    """One accelerator. Bandwidths are nominal, one direction, in GB/s (10^9 B/s).

    ``memory_bytes`` is the device memory; the packaged presets read the marketed "N GB" as
    N GiB, which is what ``nvidia-smi`` reports for the A100s (the utilization factor absorbs
    the small reservation other boards show). ``peak_tflops`` is dense FP16/BF16 tensor-core
    throughput (FP32 accumulate, what serving kernels use) without structured sparsity;
    ``peak_fp8_tflops`` the dense FP8 rate where the GPU has FP8 tensor cores (None: fp8 weights
    compute at the FP16 rate). ``sustained_tflops`` is the dense BF16 rate a large GEMM measurably
    sustains on the board (None: not measured, ``peak_tflops`` stands in): spec peaks are quoted at
    the boost clock, and a board whose power limit or kernels hold it well below that (the RTX PRO
    6000: 350 of 504 TFLOPS) would otherwise look faster than it is. The cost model's GEMM and
    attention efficiencies are fractions of :attr:`tensor_flops_per_s`. ``interconnect_gbps`` is
    the per-GPU bandwidth available to tensor-parallel all-reduce over ``interconnect``
    (``nvlink``, or ``pcie`` where there is none); the cost model prices an all-reduce's latency
    by that kind. ``compute_capability`` (CUDA's ``major.minor``) tells which attention kernel
    vLLM runs on the GPU (:func:`simkv.engine.cost_model.attention_kernel`); None: unknown.
    ``boost_clock_mhz`` is the board's maximum SM (boost) clock: a cost model calibrated on
    another GPU scales its fixed kernel latencies by the ratio of the two clocks
    (:attr:`simkv.config.cost.RooflineCostConfig.latency_clock_mhz`). Hopper's tensor-core
    peaks are quoted at a lower clock (H100 SXM5: 1,830 MHz, not 1,980; H100 whitepaper,
    Table 3); this is the clock small, latency-bound kernels run at.
    """

    name: str
    memory_bytes: int = Field(ge=1, le=int(MAX_GPU_GIB) << 30, description="bytes, ≤ 1024 GiB")
    peak_tflops: Tflops
    peak_fp8_tflops: Tflops | None = None
    sustained_tflops: Tflops | None = Field(
        None,
        description="dense BF16 TFLOP/s a large matmul measurably sustains (the presets: the "
        "ml-engineering MAMF table, else torch BF16 matmul at 8192^3; cited in each preset's "
        "source); None: peak_tflops. Overriding a preset's peak_tflops drops its measured "
        "rate unless this is given too",
    )
    hbm_bandwidth_gbps: Gbps
    host_link_gbps: Gbps
    interconnect: Interconnect = "pcie"
    interconnect_gbps: Gbps
    compute_capability: str | None = Field(
        None,
        pattern=r"^[1-9][0-9]?\.[0-9]$",
        description='CUDA compute capability, major.minor (e.g. "8.0"); picks the attention '
        "kernel vLLM runs; None: unknown (vLLM's fallback, FlashAttention 2)",
    )
    boost_clock_mhz: ClockMhz | None = Field(
        None,
        description="maximum SM (boost) clock, MHz, from the board's spec (cited in each "
        "preset's source); scales a calibration's fixed latencies to this GPU "
        "(cost_model.latency_clock_mhz); None: unknown",
    )
    source: str | None = None

    @field_validator("compute_capability", mode="before")
    @classmethod
    def _capability_text(cls, value: Any) -> Any:
        """YAML reads an unquoted ``8.9`` as a number: take it as the text it was written as."""
        if isinstance(value, float):
            return f"{value:.1f}"
        if isinstance(value, int) and not isinstance(value, bool):
            raise ValueError(f"give major.minor, e.g. {value}.0, not {value}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _resolve_preset(cls, data: Any) -> Any:
        expanded = _expand_preset("gpus", data)
        overrides = data if isinstance(data, Mapping) and "preset" in data else {}
        if "peak_tflops" in overrides and "sustained_tflops" not in overrides:
            # the preset's measured rate is its own board's: a new peak describes another board
            return {**expanded, "sustained_tflops": None}
        return expanded

    @property
    def peak_flops_per_s(self) -> float:
        return self.peak_tflops * 1e12

    @property
    def tensor_flops_per_s(self) -> float:
        """Dense FP16/BF16 tensor FLOP/s the cost model prices GEMMs and attention against: the
        measured sustained rate where there is one, else the spec peak."""
        return (self.sustained_tflops or self.peak_tflops) * 1e12

    @property
    def fp8_tensor_flops_per_s(self) -> float | None:
        """The FP8 counterpart (None without FP8 tensor cores): the spec FP8 peak, scaled by the
        same sustained-to-peak ratio as the FP16/BF16 rate (the same tensor cores and clock)."""
        if self.peak_fp8_tflops is None:
            return None
        return self.peak_fp8_tflops * 1e12 * self.tensor_flops_per_s / self.peak_flops_per_s

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_bandwidth_gbps * 1e9

    @property
    def host_link_bytes_per_s(self) -> float:
        return self.host_link_gbps * 1e9

    @property
    def interconnect_bytes_per_s(self) -> float:
        return self.interconnect_gbps * 1e9


def load_model_preset(name: str) -> ModelSpec:
    """The packaged model preset ``name``; ``ValueError`` (listing presets) if unknown."""
    return ModelSpec.model_validate(read_preset("models", name))


def load_gpu_preset(name: str) -> GpuSpec:
    """The packaged GPU preset ``name``; ``ValueError`` (listing presets) if unknown."""
    return GpuSpec.model_validate(read_preset("gpus", name))
