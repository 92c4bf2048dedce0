"""LLMServingSim's layer profiles (kernel times of one decoder layer on a real GPU), read."""

from __future__ import annotations

from pathlib import Path

import pytest

from simkv.errors import InputError
from simkv.measured.profiles import attention_kernel_us, linear_kernel_us, moe_kernel_us
from tests.measured.conftest import MEASURED

PROFILES = MEASURED / "llmservingsim-profiles"
LLAMA_PRO = PROFILES / "RTXPRO6000" / "meta-llama" / "Llama-3.1-8B" / "bf16"


def test_linear_kernels_sum_the_four_matmuls() -> None:
    """The RTX PRO 6000 Server Edition's profile at 1 token: qkv 35.8297 + o 25.664 +
    gate_up 159.488 + down 85.5257 µs (dense.csv)."""
    times = linear_kernel_us(LLAMA_PRO / "tp1" / "dense.csv")
    assert len(times) == 152 and min(times) == 1 and max(times) == 2048
    assert times[1] == pytest.approx(35.8297 + 25.664 + 159.488 + 85.5257)


def test_a_missing_kernel_or_column_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "dense.csv"
    path.write_text("layer,tokens,time_us\nqkv_proj,1,3\no_proj,1,2\ngate_up_proj,1,9\n")
    with pytest.raises(InputError, match="no down_proj time at 1 tokens") as info:
        linear_kernel_us(path)
    assert (info.value.file, info.value.field) == (str(path), "layer")
    path.write_text("layer,tokens\nqkv_proj,1\n")
    with pytest.raises(InputError, match="missing column 'time_us'"):
        linear_kernel_us(path)
    path.write_text("tokens,activated_experts,time_us\n1,8,-2\n")
    with pytest.raises(InputError, match="must be ≥ 0") as info:
        moe_kernel_us(path)
    assert (info.value.line, info.value.field) == (2, "time_us")


def test_an_attention_row_without_work_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "attention.csv"
    path.write_text("prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n0,0,1,16,8\n0,0,0,0,3\n")
    with pytest.raises(InputError, match="no prefill chunk and no decode") as info:
        attention_kernel_us(path)
    assert (info.value.line, info.value.field) == (3, "prefill_chunk")
