"""The roofline cost model: how long one engine step, one swap and one block copy take on the
hardware (what a step computes, and the ``CostModel`` protocol, are :mod:`simkv.engine.step_work`;
measured step-time tables are priced by :mod:`simkv.engine.table_cost` and
:mod:`simkv.engine.phase_cost`).

The engine asks once per batched forward pass (never per token), so :meth:`CostModel.step_time_s`
is a few float operations on coefficients folded at construction. Times are seconds of simulated
time for one tensor-parallel group: its GPUs work in lockstep on equal shards, so the group takes
the time of one GPU's share. The constants come from :mod:`simkv.config.cost`, nowhere else.
"""

from __future__ import annotations

from simkv.config.cost import RooflineCostConfig, latency_scale
from simkv.config.hardware import GpuSpec, ModelSpec
from simkv.engine.step_work import BlockTransfers, Work, empty_step

__all__ = [
    "RooflineCostModel",
    "allreduce_call_s",
    "attention_kernel",
    "attention_read_efficiency",
]


def attention_read_efficiency(cfg: RooflineCostConfig, block_size: int) -> float:
    """Bandwidth efficiency of the KV reads: ``kv_eff · min(1, block/knee) ** penalty``."""
    ratio = min(1.0, block_size / cfg.attention_block_size_knee)
    return cfg.kv_read_efficiency * ratio**cfg.small_block_attention_penalty


def attention_kernel(gpu: GpuSpec) -> str:
    """The attention kernel vLLM 0.19 runs on ``gpu`` for a standard (non-MLA) model:
    ``"flashinfer"`` on compute capability 10.x (FlashInfer leads the backend list,
    ``vllm/platforms/cuda.py::_get_backend_priorities``), else FlashAttention: ``"fa3"`` on 9.x,
    ``"fa2"`` on every other capability and when it is unknown
    (``vllm/v1/attention/backends/fa_utils.py::get_flash_attn_version``)."""
    major = None if gpu.compute_capability is None else int(gpu.compute_capability.split(".")[0])
    if major == 10:
        return "flashinfer"
    return "fa3" if major == 9 else "fa2"


def allreduce_call_s(cfg: RooflineCostConfig, gpu: GpuSpec, tensor_parallel: int) -> float:
    """Latency of one all-reduce over the tp group (0 without tensor parallelism): the call's
    fixed cost plus ``2(tp − 1)`` ring steps at the GPU's link kind's hop latency, scaled to
    the GPU's clock (:func:`~simkv.config.cost.latency_scale`)."""
    if tensor_parallel == 1:
        return 0.0
    hop_us = cfg.nvlink_hop_latency_us if gpu.interconnect == "nvlink" else cfg.pcie_hop_latency_us
    fixed_us = cfg.allreduce_latency_us + 2 * (tensor_parallel - 1) * hop_us
    return fixed_us * latency_scale(cfg, gpu) * 1e-6


class RooflineCostModel(BlockTransfers):
    """A step is a sum of phases, each priced at its own bottleneck, per GPU of the tp group::

        step = host + linear + attention + kv + all-reduce
        host      = step_overhead + (tp − 1) · worker_overhead + seq_overhead · seqs
                    + prefill_overhead · prefill seqs + output_token_overhead · decodes
                    + queued_request_overhead · queued requests         (host_s: no GPU term)
        linear    = (gemm^p + stream^p)^(1/p),   p = linear_overlap_exponent
        gemm      = GEMM FLOPs / (tp · peak · gemm_eff)
        stream    = streamed weights / (tp · hbm · weight_read_eff)
        attention = layers · attention_floor · c
                    + 4 · layers · heads · head_dim · prefill pairs / (tp · peak · attention_eff)
        kv        = (read KV + mixed · decode KV · (group − 1) · mixed_gqa_reread)
                    / (hbm · kv_read_eff') + written KV / (hbm · memory_eff)
        all-reduce = 2 · layers · (call latency · c + 2(tp−1)/tp · tokens · hidden · bytes / link)
        c         = latency_clock_mhz / the GPU's boost clock, 1 when unset (latency_scale)

    Why a sum: the kernels of a step run one after another (the linear layers, then attention,
    then the next layer), so a mixed prefill + decode step pays for its prefill's FLOPs *and* its
    decodes' KV reads; only within the linear layers do FLOPs and weight traffic overlap (one
    kernel each), and not fully: vLLM 0.19's matmuls measured at 1-2,048 tokens (RTX 4090, RTX
    PRO 6000) take the weight stream's time at a few tokens and the FLOPs' at thousands, but
    where the two are equal (176-272 tokens) 1.3 (RTX 4090) to 1.6-1.8 (RTX PRO 6000) times
    the larger. The p-norm with the fitted p ≈ 1.45 gives 2^(1/p) ≈ 1.61 there (p → ∞ is the
    classic roofline's max, p = 1 the sum): mean abs. error 2.9-6.8 % per profile against
    4.8-16.4 % for the max, worst at the RTX 4090's crossing (+23-34 %). GEMM FLOPs are
    ``2 · active non-embedding params`` per token plus ``2 · vocab · hidden`` per sequence (the
    LM head runs on sampled positions only).
    Streamed weights exclude the input embedding of an untied model (a lookup); for a mixture
    of experts they are the dense part plus the experts the step's tokens touch, in expectation
    ``E · (1 − (1 − k/E)^tokens)`` per layer. ``kv_read_eff'`` is
    :func:`attention_read_efficiency`. The tensor rate ``peak`` is the GPU's measured sustained
    rate where its preset has one (:attr:`GpuSpec.tensor_flops_per_s`), else its spec peak; fp8
    weights compute at the GPU's FP8 rate when it has one, scaled alike.

    Attention, as vLLM 0.19 runs it (one call per layer for the whole batch,
    ``vllm/v1/attention/backends/flash_attn.py::FlashAttentionImpl.forward``): each call costs
    ``attention_floor`` before its bytes and FLOPs. ``mixed`` is 1 in a step that has both a
    prefill and decodes on a GPU where vLLM runs FlashAttention 2 (:func:`attention_kernel`),
    else 0: FlashAttention 2's varlen kernel packs a grouped-query model's query heads onto
    their shared KV head, and splits a long KV over several thread blocks, only when every
    sequence of the call has one query token (``mha_varlen_fwd``,
    ``seqlenq_ngroups_swapped``, in vllm-project/flash-attention's
    ``csrc/flash_attn/flash_api.cpp``); beside a prefill, each decode's KV is read once per query
    head, ``group = heads / kv_heads`` times, and the share ``mixed_gqa_reread`` of the extra
    reads that L2 does not catch costs HBM time. FlashAttention 3 packs query heads in every
    varlen call (``hopper/heuristics.h::should_pack_gqa``): no such term on 9.x; nor on 10.x,
    where vLLM runs FlashInfer, whose mixed batches simkv has no measurement of.
    """

    __slots__ = (
        "_allreduce_fixed_s",
        "_allreduce_per_token_s",
        "_expert_miss",
        "_expert_stream_s",
        "_floor_s",
        "_gemm_per_seq_s",
        "_gemm_per_token_s",
        "_inverse_p",
        "_kv_read_per_token_s",
        "_kv_write_per_token_s",
        "_mixed_kv_per_token_s",
        "_num_experts",
        "_output_s",
        "_overhead_s",
        "_p",
        "_pair_s",
        "_prefill_s",
        "_queued_s",
        "_seq_s",
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
        peak = gpu.tensor_flops_per_s
        fp8_peak = gpu.fp8_tensor_flops_per_s
        if model.dtype == "fp8" and fp8_peak is not None:
            peak = fp8_peak
        gemm_rate = tp * peak * cfg.gemm_efficiency
        stream_rate = tp * gpu.hbm_bytes_per_s * cfg.weight_read_efficiency
        kv_shard_bytes = model.kv_bytes_per_token / tp
        workers_ms = (tp - 1) * cfg.worker_overhead_ms
        self._overhead_s = (cfg.step_overhead_ms + workers_ms) * 1e-3
        self._seq_s = cfg.seq_overhead_ms * 1e-3
        self._prefill_s = cfg.prefill_overhead_ms * 1e-3
        self._output_s = cfg.output_token_overhead_ms * 1e-3
        self._queued_s = cfg.queued_request_overhead_ms * 1e-3
        self._gemm_per_token_s = model.gemm_flops_per_token / gemm_rate
        self._gemm_per_seq_s = model.gemm_flops_per_seq / gemm_rate
        input_embedding = 0 if model.tie_word_embeddings else model.vocab_size * model.hidden_size
        dense = model.num_parameters - input_embedding - model.expert_parameters
        self._weights_s = dense * model.dtype_bytes / stream_rate
        self._p = cfg.linear_overlap_exponent
        self._inverse_p = 1.0 / cfg.linear_overlap_exponent
        self._num_experts = model.num_experts
        self._expert_miss = 1.0 - model.experts_per_token / max(model.num_experts, 1)
        per_expert = 3 * model.hidden_size * model.expert_intermediate_size * model.num_layers
        self._expert_stream_s = per_expert * model.dtype_bytes / stream_rate
        attention_width = model.num_attention_heads * model.head_dim
        attention_rate = tp * gpu.tensor_flops_per_s * cfg.attention_efficiency
        self._pair_s = 4 * model.num_layers * attention_width / attention_rate
        read_rate = gpu.hbm_bytes_per_s * attention_read_efficiency(cfg, block_size)
        self._kv_read_per_token_s = kv_shard_bytes / read_rate
        self._kv_write_per_token_s = kv_shard_bytes / (gpu.hbm_bytes_per_s * cfg.memory_efficiency)
        self._floor_s = model.num_layers * cfg.attention_floor_us * latency_scale(cfg, gpu) * 1e-6
        self._mixed_kv_per_token_s = 0.0
        if attention_kernel(gpu) == "fa2":
            group = model.num_attention_heads // model.num_kv_heads
            rereads = (group - 1) * cfg.mixed_gqa_reread
            self._mixed_kv_per_token_s = rereads * self._kv_read_per_token_s
        self._allreduce_fixed_s = 2 * model.num_layers * allreduce_call_s(cfg, gpu, tp)
        self._allreduce_per_token_s = 0.0
        if tp > 1:
            link_rate = gpu.interconnect_bytes_per_s * cfg.interconnect_efficiency
            ring_factor = 2 * (tp - 1) / tp
            token_bytes = model.hidden_size * model.dtype_bytes
            self._allreduce_per_token_s = (
                2 * model.num_layers * ring_factor * token_bytes / link_rate
            )

    def linear_s(self, tokens: int, seqs: int, experts: float | None = None) -> float:
        """The linear layers of a step computing ``tokens`` tokens for ``seqs`` sampled
        sequences: the p-norm of its GEMM FLOPs' time and its streamed weights' time (the class
        docstring). A mixture of experts streams ``experts`` routed experts per layer (default:
        the expected number the step's tokens touch)."""
        gemm_s = tokens * self._gemm_per_token_s + seqs * self._gemm_per_seq_s
        stream_s = self._weights_s
        if self._num_experts:
            if experts is None:
                experts = self._num_experts * (1.0 - self._expert_miss**tokens)
            stream_s += experts * self._expert_stream_s
        hi, lo = (gemm_s, stream_s) if gemm_s > stream_s else (stream_s, gemm_s)
        return hi * (1.0 + (lo / hi) ** self._p) ** self._inverse_p

    def attention_s(self, work: Work) -> float:
        """The attention of a step: each layer's call floor, its prefill attention's FLOPs,
        the KV it reads from the cache (a mixed step's decodes re-reading theirs, see the class
        docstring) and the KV of its new tokens written there."""
        prefill, decode = work.prefill_tokens, work.decode_tokens
        kv_s = work.kv_read_tokens * self._kv_read_per_token_s
        if prefill and decode:
            kv_s += (work.kv_read_tokens - work.prefill_kv_tokens) * self._mixed_kv_per_token_s
        return (
            self._floor_s
            + work.attention_pairs * self._pair_s
            + kv_s
            + (prefill + decode) * self._kv_write_per_token_s
        )

    def host_s(self, work: Work) -> float:
        """The host side of a step (the class docstring's ``host``), in seconds: the engine's
        scheduling, input preparation, sampling and output processing, and handing the tp
        workers their step. It depends on the engine (``host_era``) and the tp degree, never
        on the GPU. A term at 0 is skipped (it adds nothing, not even ``+ 0.0``)."""
        seqs = work.num_seqs
        host_s = self._overhead_s + seqs * self._seq_s
        if work.prefill_tokens:
            host_s += (seqs - work.decode_tokens) * self._prefill_s
        if self._output_s:
            host_s += work.decode_tokens * self._output_s
        if self._queued_s:
            host_s += work.queued_requests * self._queued_s
        return host_s

    def step_time_s(self, work: Work) -> float:
        tokens = work.prefill_tokens + work.decode_tokens
        if tokens <= 0:
            raise empty_step(work)
        seqs = work.num_seqs
        return (
            self.host_s(work)
            + self.linear_s(tokens, seqs)
            + self.attention_s(work)
            + tokens * self._allreduce_per_token_s
            + self._allreduce_fixed_s
        )
