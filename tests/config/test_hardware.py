"""Model/GPU specs, packaged presets and preset resolution inside a config."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from simkv.config.base import Frozen, parse_yaml, validate
from simkv.config.hardware import (
    GpuSpec,
    ModelSpec,
    list_presets,
    load_gpu_preset,
    load_model_preset,
)
from simkv.errors import InputError

MODELS = [
    "llama-2-13b",
    "llama-2-70b",
    "llama-2-7b",
    "llama-3-70b",
    "llama-3-8b",
    "llama-3.1-8b",
    "mistral-7b",
    "mixtral-8x7b",
    "opt-13b",
    "opt-66b",
    "qwen2.5-7b",
    "qwen3-30b-a3b",
    "qwen3-32b",
    "small-llama",
    "tiny-llama",
]
GPUS = [
    "a100-40gb",
    "a100-80gb",
    "a100-pcie-40gb",
    "a100-pcie-80gb",
    "b200",
    "cpu-epyc-zen3-1t",
    "cpu-epyc-zen4-1t",
    "h100-80gb",
    "h100-pcie",
    "h200",
    "l4",
    "l40s",
    "rtx-4090",
    "rtx-pro-6000",
    "rtx-pro-6000-server",
]
# Qwen3 sets head_dim explicitly (128), so its attention is wider than the residual stream.
WIDE_ATTENTION = {"qwen3-30b-a3b": 32 * 128, "qwen3-32b": 64 * 128}


class Deployment(Frozen):
    model: ModelSpec
    gpu: GpuSpec


def test_preset_lists_are_sorted_and_complete() -> None:
    assert list_presets("models") == MODELS
    assert list_presets("gpus") == GPUS


@pytest.mark.parametrize("name", MODELS)
def test_every_model_preset_loads_under_its_file_name(name: str) -> None:
    spec = load_model_preset(name)
    assert spec.name == name
    assert spec.source
    width = WIDE_ATTENTION.get(name, spec.hidden_size)
    assert spec.num_attention_heads * spec.head_dim == width


@pytest.mark.parametrize("name", GPUS)
def test_every_gpu_preset_loads_under_its_file_name(name: str) -> None:
    spec = load_gpu_preset(name)
    assert spec.name == name
    assert spec.source
    assert spec.memory_bytes % 2**30 == 0  # marketed "N GB" stored as N GiB


def test_opt_13b_derived_sizes() -> None:
    opt = load_model_preset("opt-13b")
    assert opt.dtype_bytes == 2
    assert opt.kv_bytes_per_token == 2 * 40 * 5120 * 2 == 819_200
    assert opt.weight_bytes == 12_853_473_280 * 2
    # tied embeddings: only the one 50272 x 5120 table is excluded
    assert opt.num_parameters_nonembedding == 12_853_473_280 - 50_272 * 5_120


def test_grouped_query_attention_presets_have_eight_kv_heads() -> None:
    for name in ("llama-2-70b", "llama-3-8b", "llama-3-70b", "mistral-7b"):
        assert load_model_preset(name).num_kv_heads == 8
    assert load_model_preset("llama-2-70b").kv_bytes_per_token == 2 * 80 * 8 * 128 * 2
    llama3 = load_model_preset("llama-3-8b")
    assert llama3.dtype == "bf16"
    assert llama3.num_parameters_nonembedding == 8_030_261_248 - 2 * 128_256 * 4_096


def test_a100_40gb_numbers() -> None:
    gpu = load_gpu_preset("a100-40gb")
    assert gpu.memory_bytes == 42_949_672_960
    assert gpu.peak_flops_per_s == 312e12
    assert gpu.hbm_bytes_per_s == 1555e9


def test_config_accepts_preset_name_override_and_inline() -> None:
    by_name = Deployment.model_validate({"model": "llama-2-7b", "gpu": "a100-80gb"})
    assert by_name.model == load_model_preset("llama-2-7b")
    assert by_name.gpu.memory_bytes == 80 * 2**30

    overridden = Deployment.model_validate(
        {"model": {"preset": "llama-2-7b", "max_model_len": 8192}, "gpu": "l4"}
    )
    assert overridden.model.max_model_len == 8192
    assert overridden.model.num_layers == 32

    inline = Deployment.model_validate(by_name.model_dump())
    assert inline == by_name


def test_overriding_a_presets_peak_drops_its_measured_rate_unless_restated() -> None:
    """A preset's ``sustained_tflops`` measures its own board; a user's new peak describes
    another one, so the measurement goes with it (the new peak prices the GEMMs)."""
    a100 = GpuSpec.model_validate("a100-80gb")
    assert a100.tensor_flops_per_s == 271.2e12
    new_peak = GpuSpec.model_validate({"preset": "a100-80gb", "peak_tflops": 400.0})
    assert new_peak.sustained_tflops is None
    assert new_peak.tensor_flops_per_s == 400e12
    both = GpuSpec.model_validate({"preset": "a100-80gb", "peak_tflops": 400.0,
                                   "sustained_tflops": 300.0})  # fmt: skip
    assert both.tensor_flops_per_s == 300e12
    other_key = GpuSpec.model_validate({"preset": "a100-80gb", "hbm_bandwidth_gbps": 1000.0})
    assert other_key.sustained_tflops == 271.2
    assert GpuSpec.model_validate(a100.model_dump()) == a100  # an inline spec keeps its rate


def test_resolved_config_dump_shows_every_number() -> None:
    dumped = Deployment.model_validate({"model": "opt-13b", "gpu": "a100-40gb"}).model_dump()
    assert dumped["model"]["num_layers"] == 40
    assert dumped["model"]["max_model_len"] == 2048
    assert dumped["gpu"]["hbm_bandwidth_gbps"] == 1555.0
    assert "preset" not in dumped["model"]


def test_unknown_preset_lists_known_presets() -> None:
    with pytest.raises(ValueError, match="unknown model preset 'gpt-5'; known presets: ") as err:
        load_model_preset("gpt-5")
    assert ", ".join(MODELS) in str(err.value)
    with pytest.raises(ValidationError, match=", ".join(GPUS)):
        Deployment.model_validate({"model": "opt-13b", "gpu": "v100"})


def test_unknown_preset_in_yaml_names_file_line_and_field() -> None:
    doc = parse_yaml("gpu: a100-40gb\nmodel: llama-9\n", "run.yaml")
    with pytest.raises(InputError) as err:
        validate(Deployment, doc)
    assert str(err.value).startswith("run.yaml:2 model: ")
    assert "known presets: llama-2-13b" in str(err.value)


def test_override_with_unknown_key_is_rejected() -> None:
    with pytest.raises(ValidationError, match="max_len"):
        Deployment.model_validate({"model": {"preset": "opt-13b", "max_len": 1}, "gpu": "l4"})


def test_heads_must_be_a_multiple_of_kv_heads() -> None:
    with pytest.raises(ValidationError, match="multiple of num_kv_heads"):
        ModelSpec.model_validate({"preset": "llama-3-8b", "num_kv_heads": 5})
