"""KV capacity in blocks, checked against hand arithmetic."""

from __future__ import annotations

import pytest

from simkv.config.hardware import load_gpu_preset, load_model_preset
from simkv.engine.capacity import InsufficientMemory, blocks_from_bytes, kv_capacity_blocks

GIB = 2**30
OPT = load_model_preset("opt-13b")
LLAMA7 = load_model_preset("llama-2-7b")
A100_80 = load_gpu_preset("a100-80gb")


def test_paper_setting_twelve_gib_of_opt_13b_kv() -> None:
    # 12 GiB / 800 KiB per token = 15728 token slots = 983 blocks of 16
    assert blocks_from_bytes(12 * GIB, OPT, tensor_parallel=1, block_size=1) == 15_728
    assert blocks_from_bytes(12 * GIB, OPT, tensor_parallel=1, block_size=16) == 983


def test_blocks_from_bytes_is_per_gpu_under_tensor_parallel() -> None:
    # each GPU holds half of every block: 409600 B per token-shard
    assert blocks_from_bytes(12 * GIB, OPT, tensor_parallel=2, block_size=16) == 1_966


def test_llama_2_7b_on_a100_80gb_at_utilization_0_9() -> None:
    usable = 85_899_345_920 * 9 // 10  # 77_309_411_328
    weights = 6_738_415_616 * 2  # 13_476_831_232
    block = 16 * 2 * 32 * 32 * 128 * 2  # 8 MiB
    assert (usable - weights) // block == 7_609
    got = kv_capacity_blocks(
        LLAMA7,
        A100_80,
        tensor_parallel=1,
        block_size=16,
        gpu_memory_utilization=0.9,
        activation_reserve_bytes=0,
    )
    assert got == 7_609
    with_reserve = kv_capacity_blocks(
        LLAMA7,
        A100_80,
        tensor_parallel=1,
        block_size=16,
        gpu_memory_utilization=0.9,
        activation_reserve_bytes=GIB,
    )
    assert with_reserve == (usable - weights - GIB) // block == 7_481


def test_tensor_parallel_splits_weights_and_blocks() -> None:
    usable = 77_309_411_328
    got = kv_capacity_blocks(
        LLAMA7,
        A100_80,
        tensor_parallel=2,
        block_size=16,
        gpu_memory_utilization=0.9,
        activation_reserve_bytes=0,
    )
    assert got == (usable - 13_476_831_232 // 2) // (8 * 2**20 // 2) == 16_825


def test_model_too_large_reports_every_term_in_gib() -> None:
    # 70B fp16 weights = 137_953_296_384 B = 128.48 GiB; a block = 16 · 327_680 B = 5 MiB
    with pytest.raises(InsufficientMemory) as err:
        kv_capacity_blocks(
            load_model_preset("llama-2-70b"),
            load_gpu_preset("l4"),
            tensor_parallel=1,
            block_size=16,
            gpu_memory_utilization=0.9,
            activation_reserve_bytes=GIB,
        )
    message = str(err.value)
    assert isinstance(err.value, ValueError)
    for term in (
        "24.00 GiB",
        "21.60 GiB usable",
        "128.48 GiB weights",
        "1.00 GiB activation",
        "-107.88 GiB for KV",
        "0.0049 GiB",
    ):
        assert term in message


def test_too_few_bytes_for_one_block() -> None:
    with pytest.raises(InsufficientMemory, match="holds no block of 16 tokens"):
        blocks_from_bytes(16 * 819_200 - 1, OPT, tensor_parallel=1, block_size=16)
    assert blocks_from_bytes(16 * 819_200, OPT, tensor_parallel=1, block_size=16) == 1


@pytest.mark.parametrize("utilization", [0.0, 1.5])
def test_bad_utilization(utilization: float) -> None:
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        kv_capacity_blocks(
            OPT,
            A100_80,
            tensor_parallel=1,
            block_size=16,
            gpu_memory_utilization=utilization,
            activation_reserve_bytes=0,
        )
