"""Roofline and table cost models against hand-computed times (seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from simkv.config.cost import CostConfig, RooflineCostConfig, TableCostConfig, UnknownClock
from simkv.config.hardware import GpuSpec, load_gpu_preset, load_model_preset
from simkv.engine.cost_model import RooflineCostModel, attention_kernel
from simkv.engine.costs import build_cost_model
from simkv.engine.step_work import StepWork, chunk_attention_pairs
from simkv.engine.table_cost import TableCostModel
from simkv.errors import InputError
from simkv.run import load_config

OPT = load_model_preset("opt-13b")  # 40 layers, hidden 5120, 819_200 KV bytes per token
# 271.2 sustained TFLOP/s (312 spec), 1555 GB/s, PCIe 32 GB/s, NVLink 300 GB/s
A100 = load_gpu_preset("a100-40gb")
# explicit values, so the hand computations below do not move with the defaults
ROOF = RooflineCostConfig(
    step_overhead_ms=2.0,
    seq_overhead_ms=0.0,
    prefill_overhead_ms=0.0,
    gemm_efficiency=0.6,
    linear_overlap_exponent=64.0,  # the larger of FLOP and stream time: see the p-norm test
    weight_read_efficiency=0.8,
    kv_read_efficiency=0.8,
    attention_efficiency=0.5,
    attention_floor_us=0.0,
    mixed_gqa_reread=0.0,
    allreduce_latency_us=10.0,
    nvlink_hop_latency_us=0.0,
    pcie_hop_latency_us=0.0,
    interconnect_efficiency=0.7,
)
WEIGHT_BYTES = 12_853_473_280 * 2
NONEMBED_PARAMS = 12_853_473_280 - 50_272 * 5_120
FLOP_RATE = 271.2e12 * 0.6  # the preset's sustained rate (ml-engineering MAMF, A100 SXM)
BYTE_RATE = 1555e9 * 0.8
KV = 819_200


def roofline(tp: int = 1, block_size: int = 16) -> RooflineCostModel:
    return RooflineCostModel(ROOF, OPT, A100, tensor_parallel=tp, block_size=block_size)


# eight sequences decoding their 512th token: each reads the KV of its 512 tokens
DECODE = StepWork(
    prefill_tokens=0, decode_tokens=8, attention_pairs=0, kv_read_tokens=8 * 512, num_seqs=8
)
# one 2048-token prompt from scratch: causal pairs 2048·2049/2, nothing read from the cache
PREFILL = StepWork(
    prefill_tokens=2048,
    decode_tokens=0,
    attention_pairs=2048 * 2049 // 2,
    kv_read_tokens=0,
    num_seqs=1,
)
PARAMS = 12_853_473_280  # OPT-13B ties its embedding to the LM head: every weight is streamed
LM_HEAD_FLOPS = 2 * 50_272 * 5_120  # per sampled sequence
PAIR_FLOPS = 4 * 40 * 5_120  # per attention pair: QK^T and PV, 2 FLOPs each, every layer
STREAM_S = WEIGHT_BYTES / BYTE_RATE  # weight_read_efficiency 0.8


def test_chunk_attention_pairs() -> None:
    assert chunk_attention_pairs(3, 5) == 3 * 5 + 6
    assert chunk_attention_pairs(1, 511) == 512
    assert chunk_attention_pairs(2048, 0) == PREFILL.attention_pairs


def test_decode_step_streams_the_weights_then_reads_the_kv() -> None:
    gemm = (2 * NONEMBED_PARAMS * 8 + LM_HEAD_FLOPS * 8) / FLOP_RATE
    assert gemm < STREAM_S  # the linear layers are bound by the weight stream
    kv = 4096 * KV / BYTE_RATE + 8 * KV / BYTE_RATE  # read 4096 tokens' KV, write 8
    assert roofline().step_time_s(DECODE) == pytest.approx(0.002 + STREAM_S + kv, rel=1e-12)
    assert roofline().step_time_s(DECODE) == pytest.approx(0.0253673, abs=1e-7)


@pytest.mark.parametrize("p", [1.0, 1.45, 2.0])
def test_the_linear_layers_cost_the_p_norm_of_their_flop_and_stream_times(p: float) -> None:
    """100 decodes: their GEMMs (15.8 ms at 0.6 of the sustained rate) and the weight stream
    (20.7 ms at 0.8 of the bandwidth) combine as ``(gemm^p + stream^p)^(1/p)``: their sum at
    p = 1; within 1e-8 of the larger at the golden tests' p = 64."""
    gemm = (2 * NONEMBED_PARAMS * 100 + LM_HEAD_FLOPS * 100) / FLOP_RATE
    assert gemm == pytest.approx(0.0158, abs=1e-4)
    assert pytest.approx(0.0207, abs=1e-4) == STREAM_S
    model = RooflineCostModel(ROOF.model_copy(update={"linear_overlap_exponent": p}), OPT, A100,
                              tensor_parallel=1, block_size=16)  # fmt: skip
    expected = (gemm**p + STREAM_S**p) ** (1 / p)
    assert model.linear_s(100, 100) == pytest.approx(expected, rel=1e-12)
    if p == 1.0:
        assert model.linear_s(100, 100) == pytest.approx(gemm + STREAM_S, rel=1e-12)
    assert roofline().linear_s(100, 100) == pytest.approx(STREAM_S, rel=1e-8)


def test_prefill_step_pays_its_gemm_and_its_attention() -> None:
    gemm = (2 * NONEMBED_PARAMS * 2048 + LM_HEAD_FLOPS) / FLOP_RATE
    attention = PAIR_FLOPS * 2_098_176 / (271.2e12 * 0.5)  # attention_efficiency 0.5
    assert gemm > STREAM_S
    write = 2048 * KV / BYTE_RATE
    expected = 0.002 + gemm + attention + write
    assert roofline().step_time_s(PREFILL) == pytest.approx(expected, rel=1e-12)
    assert roofline().step_time_s(PREFILL) == pytest.approx(0.3330970, abs=1e-7)


def test_a_mixed_step_costs_the_sum_of_its_phases() -> None:
    """A 412-token chunk beside 100 decodes: the chunk's FLOPs do not hide under the decodes'
    memory traffic (the kernels run one after another), only the weight stream is shared."""
    decodes = StepWork(prefill_tokens=0, decode_tokens=100, attention_pairs=0,
                       kv_read_tokens=100 * 1000, num_seqs=100)  # fmt: skip
    chunk = chunk_attention_pairs(412, 0)
    mixed = StepWork(prefill_tokens=412, decode_tokens=100, attention_pairs=chunk,
                     kv_read_tokens=100 * 1000, num_seqs=101)  # fmt: skip
    model = roofline()
    gemm_mixed = (2 * NONEMBED_PARAMS * 512 + LM_HEAD_FLOPS * 101) / FLOP_RATE
    gemm_decodes = (2 * NONEMBED_PARAMS * 100 + LM_HEAD_FLOPS * 100) / FLOP_RATE
    extra = (
        max(gemm_mixed, STREAM_S)
        - max(gemm_decodes, STREAM_S)
        + PAIR_FLOPS * chunk / (271.2e12 * 0.5)
        + 412 * KV / BYTE_RATE
    )
    assert model.step_time_s(mixed) - model.step_time_s(decodes) == pytest.approx(extra, rel=1e-9)
    assert extra > 0.045  # about 49 ms, where a max(compute, memory) over the step gave 0.3 ms


def test_each_layer_pays_the_attention_floor_once_a_step() -> None:
    """vLLM 0.19 makes one attention call per layer for the whole batch
    (``vllm/v1/attention/backends/flash_attn.py::FlashAttentionImpl.forward``)."""
    cfg = ROOF.model_copy(update={"attention_floor_us": 13.0})
    model = RooflineCostModel(cfg, OPT, A100, tensor_parallel=1, block_size=16)
    for work in (DECODE, PREFILL):
        floor = model.step_time_s(work) - roofline().step_time_s(work)
        assert floor == pytest.approx(40 * 13e-6, rel=1e-9)  # 40 layers, once each
    assert model.attention_s(DECODE) - roofline().attention_s(DECODE) == pytest.approx(520e-6)


LLAMA = load_model_preset("llama-3.1-8b")  # 32 query heads share 8 KV heads: group 4
LLAMA_KV = 131_072  # 2 · 32 layers · 8 KV heads · 128 · 2 bytes


def _mixed(prefill_kv: int) -> StepWork:
    """A 256-token chunk after ``prefill_kv`` cached tokens beside 16 decodes of 1,023."""
    return StepWork(prefill_tokens=256, decode_tokens=16,
                    attention_pairs=chunk_attention_pairs(256, prefill_kv),
                    kv_read_tokens=prefill_kv + 16 * 1024, num_seqs=17,
                    prefill_kv_tokens=prefill_kv)  # fmt: skip


def test_a_mixed_step_on_flashattention_2_rereads_the_decodes_kv() -> None:
    """FlashAttention 2 packs query heads onto their KV head only when every sequence of the
    call has one query token (vllm-project/flash-attention ``csrc/flash_attn/flash_api.cpp``,
    ``mha_varlen_fwd``: ``seqlenq_ngroups_swapped``): beside a prefill, each decode reads its KV
    once per query head. The extra reads are the decodes' KV · (group − 1) · reread."""
    cfg = ROOF.model_copy(update={"mixed_gqa_reread": 0.5})
    base = RooflineCostModel(ROOF, LLAMA, A100, tensor_parallel=1, block_size=16)
    fa2 = RooflineCostModel(cfg, LLAMA, A100, tensor_parallel=1, block_size=16)
    reread = 16 * 1024 * LLAMA_KV * (4 - 1) * 0.5 / BYTE_RATE
    for prefill_kv in (0, 3000):  # the chunk's own cached context is read once
        work = _mixed(prefill_kv)
        assert fa2.step_time_s(work) - base.step_time_s(work) == pytest.approx(reread, rel=1e-9)
    decodes = StepWork(prefill_tokens=0, decode_tokens=16, attention_pairs=0,
                       kv_read_tokens=16 * 1024, num_seqs=16)  # fmt: skip
    assert fa2.step_time_s(decodes) == base.step_time_s(decodes)  # decode-only: packed, split
    assert fa2.step_time_s(PREFILL) == pytest.approx(
        RooflineCostModel(ROOF, LLAMA, A100, tensor_parallel=1, block_size=16).step_time_s(PREFILL)
    )


def test_no_mixed_reread_where_vllm_runs_another_kernel_or_heads_are_not_grouped() -> None:
    cfg = ROOF.model_copy(update={"mixed_gqa_reread": 0.5})
    work = _mixed(0)
    for gpu in ("h100-80gb", "b200"):  # FlashAttention 3 packs query heads; FlashInfer
        spec = load_gpu_preset(gpu)
        with_it = RooflineCostModel(cfg, LLAMA, spec, tensor_parallel=1, block_size=16)
        without = RooflineCostModel(ROOF, LLAMA, spec, tensor_parallel=1, block_size=16)
        assert with_it.step_time_s(work) == without.step_time_s(work)
    mha = RooflineCostModel(cfg, OPT, A100, tensor_parallel=1, block_size=16)  # group 1
    assert mha.step_time_s(work) == roofline().step_time_s(work)


def test_attention_kernel_follows_vllm_by_compute_capability() -> None:
    kernels = {
        name: attention_kernel(load_gpu_preset(name))
        for name in ("a100-80gb", "rtx-4090", "rtx-pro-6000", "h100-80gb", "h200", "b200")
    }
    assert kernels == {"a100-80gb": "fa2", "rtx-4090": "fa2", "rtx-pro-6000": "fa2",
                       "h100-80gb": "fa3", "h200": "fa3", "b200": "flashinfer"}  # fmt: skip
    assert attention_kernel(A100.model_copy(update={"compute_capability": None})) == "fa2"


def test_step_work_rejects_more_prefill_kv_than_kv_read() -> None:
    with pytest.raises(ValueError, match="prefill_kv_tokens"):
        StepWork(prefill_tokens=4, decode_tokens=0, attention_pairs=10, kv_read_tokens=3,
                 num_seqs=1, prefill_kv_tokens=4)  # fmt: skip


def test_overheads_per_step_sequence_and_prefill() -> None:
    cfg = ROOF.model_copy(
        update={"step_overhead_ms": 3, "seq_overhead_ms": 0.1, "prefill_overhead_ms": 0.5}
    )
    model = RooflineCostModel(cfg, OPT, A100, tensor_parallel=1, block_size=16)
    base = roofline().step_time_s(DECODE) - 0.002
    assert model.step_time_s(DECODE) == pytest.approx(base + 0.003 + 8 * 0.1e-3, rel=1e-12)
    mixed = StepWork(prefill_tokens=10, decode_tokens=8, attention_pairs=55,
                     kv_read_tokens=4096, num_seqs=10)  # fmt: skip
    overhead = model.step_time_s(mixed) - roofline().step_time_s(mixed) + 0.002
    assert overhead == pytest.approx(0.003 + 10 * 0.1e-3 + 2 * 0.5e-3, rel=1e-9)


def test_tensor_parallel_adds_all_reduce() -> None:
    kv = (4096 * KV / 2 + 8 * KV / 2) / BYTE_RATE
    # two ring all-reduces per layer of 8 tokens · 5120 · 2 bytes, ring factor 2(2−1)/2 = 1
    allreduce = 2 * 40 * (10e-6 + 1.0 * 8 * 5120 * 2 / (300e9 * 0.7))
    got = roofline(tp=2).step_time_s(DECODE)
    assert got == pytest.approx(0.002 + STREAM_S / 2 + kv + allreduce, rel=1e-12)
    assert got - 0.002 - STREAM_S / 2 - kv == pytest.approx(8.312076e-4, rel=1e-6)


def test_all_reduce_hops_grow_with_tp_and_depend_on_the_link() -> None:
    cfg = ROOF.model_copy(update={"nvlink_hop_latency_us": 5, "pcie_hop_latency_us": 70})
    nvlink = A100.model_copy(update={"interconnect": "nvlink"})
    pcie = A100.model_copy(update={"interconnect": "pcie"})
    base = ROOF

    def hops_s(gpu: GpuSpec, tp: int) -> float:
        with_hops = RooflineCostModel(cfg, OPT, gpu, tensor_parallel=tp, block_size=16)
        without = RooflineCostModel(base, OPT, gpu, tensor_parallel=tp, block_size=16)
        return with_hops.step_time_s(DECODE) - without.step_time_s(DECODE)

    assert hops_s(nvlink, 2) == pytest.approx(2 * 40 * 2 * 5e-6, rel=1e-9)  # 2(tp−1) = 2 steps
    assert hops_s(nvlink, 8) == pytest.approx(2 * 40 * 14 * 5e-6, rel=1e-9)
    assert hops_s(pcie, 2) == pytest.approx(2 * 40 * 2 * 70e-6, rel=1e-9)
    assert hops_s(pcie, 1) == 0.0


def test_each_tensor_parallel_worker_beyond_the_first_adds_its_overhead() -> None:
    base = ROOF.model_copy(update={"worker_overhead_ms": 0.0})
    with_workers = ROOF.model_copy(update={"worker_overhead_ms": 1.5})
    for tp in (1, 2, 4, 8):
        slow = RooflineCostModel(with_workers, OPT, A100, tensor_parallel=tp, block_size=16)
        fast = RooflineCostModel(base, OPT, A100, tensor_parallel=tp, block_size=16)
        for work in (DECODE, PREFILL):
            extra = slow.step_time_s(work) - fast.step_time_s(work)
            assert extra == pytest.approx((tp - 1) * 1.5e-3, abs=1e-12)


def test_fp8_kv_halves_kv_traffic_and_fp8_weights_use_the_fp8_rate() -> None:
    fp8_kv = OPT.model_copy(update={"kv_dtype": "fp8"})
    assert fp8_kv.kv_bytes_per_token == KV // 2
    model = RooflineCostModel(ROOF, fp8_kv, A100, tensor_parallel=1, block_size=16)
    kv = (4096 * KV + 8 * KV) / BYTE_RATE
    assert model.step_time_s(DECODE) == pytest.approx(roofline().step_time_s(DECODE) - kv / 2)
    h100 = load_gpu_preset("h100-80gb")
    assert h100.peak_fp8_tflops is not None
    fp8_weights = OPT.model_copy(update={"dtype": "fp8", "kv_dtype": "fp16"})
    fast = RooflineCostModel(ROOF, fp8_weights, h100, tensor_parallel=1, block_size=16)
    slow_gpu = h100.model_copy(update={"peak_fp8_tflops": None})
    slow = RooflineCostModel(ROOF, fp8_weights, slow_gpu, tensor_parallel=1, block_size=16)
    gemm = (2 * NONEMBED_PARAMS * 2048 + LM_HEAD_FLOPS) / 0.6
    # both rates at the preset's measured sustained share of its spec peak (797.51 / 989.4)
    assert h100.sustained_tflops is not None
    share = h100.sustained_tflops / h100.peak_tflops
    bf16_rate = h100.sustained_tflops * 1e12
    fp8_rate = h100.peak_fp8_tflops * 1e12 * share
    expected = gemm / bf16_rate - gemm / fp8_rate
    assert slow.step_time_s(PREFILL) - fast.step_time_s(PREFILL) == pytest.approx(expected)


def test_a_measured_sustained_rate_prices_gemms_and_attention_instead_of_the_peak() -> None:
    """The RTX PRO 6000 sustains 350.31 of its 503.8 spec TFLOPS (torch BF16 matmul at 8192^3):
    a compute-bound prefill's GEMM and attention terms grow by the ratio; memory terms do not."""
    pro = load_gpu_preset("rtx-pro-6000")
    assert pro.sustained_tflops == 350.31
    at_peak = pro.model_copy(update={"sustained_tflops": None})
    model = load_model_preset("llama-3.1-8b")
    prefill = StepWork(prefill_tokens=2048, decode_tokens=0, attention_pairs=2048 * 2049 // 2,
                       kv_read_tokens=0, num_seqs=1)  # fmt: skip

    def compute_s(gpu: GpuSpec) -> float:
        free = ROOF.model_copy(update={"step_overhead_ms": 0.0, "seq_overhead_ms": 0.0,
                                       "memory_efficiency": 4.0})  # fmt: skip
        roof = RooflineCostModel(free, model, gpu, tensor_parallel=1, block_size=16)
        return roof.step_time_s(prefill) - 2048 * model.kv_bytes_per_token / (
            gpu.hbm_bytes_per_s * 4.0)  # fmt: skip

    assert compute_s(pro) == pytest.approx(compute_s(at_peak) * 503.8 / 350.31, rel=1e-9)


def test_moe_streams_the_experts_its_tokens_touch() -> None:
    moe = load_model_preset("mixtral-8x7b")
    model = RooflineCostModel(ROOF, moe, A100, tensor_parallel=1, block_size=16)
    per_expert_s = 3 * moe.hidden_size * moe.expert_intermediate_size * moe.num_layers * 2 / (
        1555e9 * 0.8)  # fmt: skip

    def decode(batch: int) -> StepWork:
        return StepWork(prefill_tokens=0, decode_tokens=batch, attention_pairs=0,
                        kv_read_tokens=0, num_seqs=batch)  # fmt: skip

    touched_1 = 8 * (1 - (1 - 2 / 8) ** 1)  # one token uses 2 of 8 experts
    touched_4 = 8 * (1 - (1 - 2 / 8) ** 4)
    grown = model.step_time_s(decode(4)) - model.step_time_s(decode(1))
    writes = 3 * moe.kv_bytes_per_token / BYTE_RATE
    assert grown == pytest.approx((touched_4 - touched_1) * per_expert_s + writes, rel=1e-9)
    assert moe.active_parameters_nonembedding < moe.num_parameters_nonembedding / 3


def test_efficiencies_may_exceed_one_up_to_four() -> None:
    assert RooflineCostConfig(gemm_efficiency=2.5).gemm_efficiency == 2.5
    with pytest.raises(ValidationError):
        RooflineCostConfig(gemm_efficiency=4.5)


def test_small_blocks_slow_the_kv_read_only() -> None:
    read_16 = 4096 * KV / BYTE_RATE
    read_4 = 4096 * KV / (1555e9 * 0.8 * 0.5)  # (4/16) ** 0.5 = 0.5
    slower = roofline(block_size=4).step_time_s(DECODE) - roofline().step_time_s(DECODE)
    assert slower == pytest.approx(read_4 - read_16, rel=1e-9)
    assert roofline(block_size=32).step_time_s(DECODE) == roofline().step_time_s(DECODE)


def test_empty_step_and_negative_counts_are_rejected() -> None:
    empty = StepWork(
        prefill_tokens=0, decode_tokens=0, attention_pairs=0, kv_read_tokens=0, num_seqs=0
    )
    with pytest.raises(ValueError, match="empty step"):
        roofline().step_time_s(empty)
    with pytest.raises(ValueError, match="negative count"):
        StepWork(
            prefill_tokens=-1, decode_tokens=1, attention_pairs=1, kv_read_tokens=1, num_seqs=1
        )


def test_swap_time_grows_per_block_and_penalises_small_blocks() -> None:
    # OPT-13B: a block is 2 · 40 copy calls of 5 µs (400 µs) + its bytes over the host link
    per_block_16 = 400e-6 + 16 * KV / (32e9 * 0.8)  # 400 µs + 512 µs
    model = roofline()
    assert model.swap_time_s(0) == 0.0
    assert model.swap_time_s(1) == pytest.approx(per_block_16, rel=1e-12)
    assert model.swap_time_s(3) == pytest.approx(3 * 9.12e-4, rel=1e-12)
    # the same 16 tokens in 16 blocks of 1 pay the per-block copy calls 16 times
    assert roofline(block_size=1).swap_time_s(16) == pytest.approx(16 * (400e-6 + 3.2e-5))
    assert roofline(tp=2).swap_time_s(1) == pytest.approx(400e-6 + 8 * KV / 2.56e10)
    with pytest.raises(ValueError, match="num_blocks"):
        model.swap_time_s(-1)


def test_copy_time_reads_and_writes_each_block() -> None:
    assert roofline().copy_time_s(5) == pytest.approx(5 * 2 * 16 * KV / BYTE_RATE, rel=1e-12)


def test_cost_config_union_is_selected_by_kind() -> None:
    adapter = TypeAdapter(CostConfig)
    assert adapter.validate_python({"kind": "roofline"}) == RooflineCostConfig()
    table = adapter.validate_python({"kind": "table", "path": "t.csv", "swap_copy_latency_us": 7})
    assert isinstance(table, TableCostConfig)
    assert table.swap_copy_latency_us == 7.0
    bad_configs = [
        {"kind": "magic"},
        {"path": "t.csv"},
        {"kind": "roofline", "compute_efficiency": 0.5},
        {"kind": "roofline", "gemm_efficiency": 5},
    ]
    for bad in bad_configs:
        with pytest.raises(ValidationError):
            adapter.validate_python(bad)


# --------------------------------------------------------------------------------------------
# table


def table_model(tmp_path: Path, text: str, name: str = "steps.csv") -> TableCostModel:
    (tmp_path / name).write_text(text)
    cfg = TableCostConfig(path=Path(name))
    model = build_cost_model(cfg, OPT, A100, tensor_parallel=1, block_size=16, base_dir=tmp_path)
    assert isinstance(model, TableCostModel)
    return model


def tokens(n: int, kv_read: int = 0) -> StepWork:
    return StepWork(
        prefill_tokens=n, decode_tokens=0, attention_pairs=n, kv_read_tokens=kv_read, num_seqs=1
    )


def test_table_interpolates_and_extrapolates_in_num_tokens(tmp_path: Path) -> None:
    model = table_model(tmp_path, "step_time_ms,num_tokens\n20,116\n10,16\n30,316\n")
    assert model.step_time_s(tokens(66)) == pytest.approx(0.015)
    assert model.step_time_s(tokens(216)) == pytest.approx(0.025)
    assert model.step_time_s(tokens(116)) == pytest.approx(0.020)
    assert model.step_time_s(tokens(1)) == pytest.approx(0.010)  # clamped below
    assert model.step_time_s(tokens(516)) == pytest.approx(0.040)  # last slope 0.05 ms/token
    with pytest.raises(ValueError, match="empty step"):
        model.step_time_s(tokens(0))


def test_table_extrapolation_never_decreases(tmp_path: Path) -> None:
    model = table_model(tmp_path, "num_tokens,step_time_ms\n16,10\n116,20\n316,15\n")
    assert model.step_time_s(tokens(416)) == pytest.approx(0.015)


def test_table_is_bilinear_over_a_grid(tmp_path: Path) -> None:
    text = "num_tokens,kv_read_tokens,step_time_ms\n10,0,5\n110,0,15\n10,1000,9\n110,1000,29\n"
    model = table_model(tmp_path, text)
    assert model.step_time_s(tokens(60, 500)) == pytest.approx(0.0145)  # (10 + 19) / 2
    assert model.step_time_s(tokens(60, 0)) == pytest.approx(0.010)
    # beyond both axes: rows give 25 and 49 at 210 tokens, then 49 + 0.024 · 1000
    assert model.step_time_s(tokens(210, 2000)) == pytest.approx(0.073)


def test_table_shares_swap_parameters_with_roofline(tmp_path: Path) -> None:
    model = table_model(tmp_path, "num_tokens,step_time_ms\n1,1\n")
    assert model.swap_time_s(2) == roofline().swap_time_s(2)
    assert model.copy_time_s(2) == roofline().copy_time_s(2)
    assert model.step_time_s(tokens(999)) == pytest.approx(0.001)


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("num_tokens,step_time_ms\n1,10\n2,abc\n", ":3 step_time_ms", "expected a positive"),
        ("num_tokens,step_time_ms\n1,10\n\n2,0\n", ":4 step_time_ms", "got '0'"),
        ("num_tokens,step_time_ms\n-1,10\n", ":2 num_tokens", "non-negative number"),
        ("num_tokens,step_time_ms\n1,10\n1,12\n", ":3 num_tokens", "duplicate row"),
        ("num_tokens,step_time_ms\n1,10,3\n", ":2", "expected 2 fields, got 3"),
        ("num_tokens,latency\n", ":1 latency", "unknown column"),
        ("num_tokens\n", ":1 step_time_ms", "missing column"),
        ("", ":1 num_tokens", "missing column"),
        ("num_tokens,step_time_ms\n", ":1", "no data rows"),
        (
            "num_tokens,kv_read_tokens,step_time_ms\n1,0,1\n2,0,2\n1,5,3\n",
            " kv_read_tokens",
            "no row for num_tokens=2 with kv_read_tokens=5",
        ),
    ],
)
def test_bad_csv_is_an_input_error_with_location(
    tmp_path: Path, text: str, where: str, message: str
) -> None:
    with pytest.raises(InputError) as err:
        table_model(tmp_path, text)
    path = str(tmp_path / "steps.csv")
    assert str(err.value).startswith(f"{path}{where}: ")
    assert message in str(err.value)


def test_missing_table_file(tmp_path: Path) -> None:
    cfg = TableCostConfig(path=tmp_path / "absent.csv")
    with pytest.raises(InputError, match=r"absent\.csv: cannot read"):
        build_cost_model(cfg, OPT, A100, tensor_parallel=1, block_size=16, base_dir=Path("/"))


H100 = load_gpu_preset("h100-80gb")  # boost clock 1980 MHz; the A100s boost to 1410
LATENCIES = ROOF.model_copy(update={"attention_floor_us": 13.0, "nvlink_hop_latency_us": 5.0})


def _fixed_latencies_s(cfg: RooflineCostConfig, tp: int) -> float:
    """The attention floor of 40 layers plus, at tp > 1, their 80 all-reduce calls with
    2(tp − 1) hops each."""
    calls = 80 * (cfg.allreduce_latency_us + 2 * (tp - 1) * cfg.nvlink_hop_latency_us)
    return (40 * cfg.attention_floor_us + (calls if tp > 1 else 0.0)) * 1e-6


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_a_latency_clock_scales_the_fixed_latencies_by_the_gpus_clock(tp: int) -> None:
    """Set to the A100's 1410 MHz, the fitted latencies are the A100's: unchanged there, and
    1410/1980 of them on an H100; nothing else moves."""
    clocked = LATENCIES.model_copy(update={"latency_clock_mhz": 1410.0})
    gpu = A100.model_copy(update={"interconnect": "nvlink"})
    for work in (DECODE, PREFILL):
        same = RooflineCostModel(clocked, OPT, gpu, tensor_parallel=tp, block_size=16)
        plain = RooflineCostModel(LATENCIES, OPT, gpu, tensor_parallel=tp, block_size=16)
        assert same.step_time_s(work) == plain.step_time_s(work)
        fast = RooflineCostModel(clocked, OPT, H100, tensor_parallel=tp, block_size=16)
        slow = RooflineCostModel(LATENCIES, OPT, H100, tensor_parallel=tp, block_size=16)
        saved = _fixed_latencies_s(LATENCIES, tp) * (1 - 1410 / 1980)
        assert slow.step_time_s(work) - fast.step_time_s(work) == pytest.approx(saved, rel=1e-9)
        assert fast.host_s(work) == slow.host_s(work)


def test_without_a_latency_clock_no_gpu_changes_the_latencies() -> None:
    assert LATENCIES.latency_clock_mhz is None
    for gpu in (A100, H100, load_gpu_preset("rtx-4090")):
        model = RooflineCostModel(LATENCIES, OPT, gpu, tensor_parallel=1, block_size=16)
        zero = LATENCIES.model_copy(update={"attention_floor_us": 0.0})
        base = RooflineCostModel(zero, OPT, gpu, tensor_parallel=1, block_size=16)
        assert model.attention_s(DECODE) - base.attention_s(DECODE) == pytest.approx(40 * 13e-6)


def test_a_latency_clock_on_a_gpu_of_unknown_clock_is_an_error() -> None:
    rtx = load_gpu_preset("rtx-4090")
    assert rtx.boost_clock_mhz is None
    clocked = ROOF.model_copy(update={"latency_clock_mhz": 1410.0})
    with pytest.raises(UnknownClock, match="gpu 'rtx-4090' has no boost_clock_mhz"):
        RooflineCostModel(clocked, OPT, rtx, tensor_parallel=1, block_size=16)
    path = Path(__file__).parents[2] / "configs" / "vllm_v1.yaml"
    with pytest.raises(InputError, match=r"cost_model\.latency_clock_mhz: needs the GPU's clock"):
        load_config(path, ["gpu=rtx-4090", "cost_model.latency_clock_mhz=1410"])
    assert load_config(path, ["gpu=h100-80gb", "cost_model.latency_clock_mhz=1410"])


def test_the_host_side_of_a_step_is_the_same_on_every_gpu() -> None:
    """``host_s`` is the overheads (per step, worker, sequence and prefill) and nothing else;
    the GPU terms are the rest of the step."""
    cfg = ROOF.model_copy(update={"seq_overhead_ms": 0.1, "prefill_overhead_ms": 0.5,
                                  "worker_overhead_ms": 1.5})  # fmt: skip
    for work, host in ((DECODE, 2e-3 + 1.5e-3 + 8e-4), (PREFILL, 2e-3 + 1.5e-3 + 1e-4 + 5e-4)):
        times = []
        for gpu in (A100, H100):
            model = RooflineCostModel(cfg, OPT, gpu, tensor_parallel=2, block_size=16)
            assert model.host_s(work) == pytest.approx(host, rel=1e-12)
            times.append(model.step_time_s(work) - model.host_s(work))
        assert times[1] < times[0] / 1.5  # the H100's GPU terms are faster
