"""load_config fills a kind: measured workload's engine settings where the config is silent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simkv.errors import InputError
from simkv.run import load_config, simulate

ROOT = Path(__file__).resolve().parents[2]
RTX4090 = ROOT / "traces" / "measured" / "llmservingsim-vllm0.19" / "RTX4090_Llama-3.1-8B"
RTXPRO6000 = RTX4090.parent / "RTXPRO6000_Llama-3.1-8B"


def config(tmp_path: Path, body: str, run: Path = RTX4090) -> Path:
    """A config in tmp_path whose workload path is relative to it, as users write them."""
    relative = os.path.relpath(run, tmp_path)
    path = tmp_path / "run.yaml"
    path.write_text(f"workload:\n  kind: measured\n  path: {relative}\n"
                    f"model: llama-3-8b\ngpu: a100-80gb\n{body}")  # fmt: skip
    return path


def test_engine_settings_fill_unset_keys(tmp_path):
    cfg = load_config(config(tmp_path, ""))
    assert cfg.scheduler.kind == "vllm_v1"
    assert (cfg.scheduler.max_num_seqs, cfg.scheduler.max_num_batched_tokens) == (256, 2048)
    assert cfg.scheduler.enable_chunked_prefill is True
    assert (cfg.kv_cache.num_blocks, cfg.kv_cache.block_size) == (2588, 16)
    assert cfg.kv_cache.prefix_caching == "hash"
    assert cfg.parallel.tensor_parallel == 1
    assert cfg.model.max_model_len == 32768  # from a preset name: {preset: ..., max_model_len}
    assert cfg.model.name == "llama-3-8b"


def test_explicit_values_win(tmp_path):
    path = config(tmp_path, "scheduler:\n  kind: vllm_v1\n  max_num_seqs: 64\n")
    model = "model: {preset: llama-3-8b, max_model_len: 4096}\n"
    path.write_text(path.read_text().replace("model: llama-3-8b\n", model))
    cfg = load_config(path, ["kv_cache.num_blocks=1000"])
    assert cfg.scheduler.max_num_seqs == 64  # the file
    assert cfg.scheduler.max_num_batched_tokens == 2048  # measured
    assert cfg.kv_cache.num_blocks == 1000  # --set
    assert cfg.model.max_model_len == 4096


def test_engine_settings_off(tmp_path):
    cfg = load_config(config(tmp_path, ""), ["workload.engine_settings=false"])
    assert cfg.scheduler.max_num_seqs == 256 and cfg.scheduler.max_num_batched_tokens == 8192
    assert cfg.kv_cache.num_blocks is None and cfg.model.max_model_len == 8192


def test_only_what_the_config_can_take(tmp_path):
    cfg = load_config(config(tmp_path, "scheduler: {kind: vllm_v0}\nkv_cache: {capacity_gib: 4}\n"))
    assert cfg.scheduler.kind == "vllm_v0" and cfg.scheduler.max_num_seqs == 256  # not filled
    assert cfg.kv_cache.prefix_caching == "none" and cfg.kv_cache.num_blocks is None
    cfg = load_config(config(tmp_path, "kv_cache: {block_size: 32}\n"))
    assert cfg.kv_cache.num_blocks is None  # 2,588 blocks were of 16 tokens


def test_missing_measurement_points_at_the_config(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("name: x\nworkload:\n  kind: measured\n  path: nowhere\nmodel: llama-3-8b\n")
    with pytest.raises(InputError, match="no such file") as info:
        load_config(path)
    # every error at once: the missing measurement at its key, and the config's missing gpu
    located = [(e.file, e.line, e.field) for e in (info.value, *info.value.also)]
    assert located == [(str(path), 1, "gpu"), (str(path), 4, "workload.path")]


@pytest.mark.parametrize("name", ["rtx4090_llama31_8b", "rtxpro6000_llama31_8b"])
def test_shipped_configs(name):
    cfg = load_config(ROOT / "configs" / "measured" / f"{name}.yaml")
    assert cfg.model.max_model_len == 32768 and cfg.kv_cache.prefix_caching == "hash"
    if name.startswith("rtx4090"):
        assert (cfg.kv_cache.num_blocks, cfg.scheduler.max_num_seqs) == (2588, 256)
    else:  # the Server Edition (its publisher's profiles of the same hardware name it)
        assert (cfg.kv_cache.num_blocks, cfg.scheduler.max_num_seqs) == (None, 128)
        assert (cfg.gpu.name, cfg.gpu.hbm_bandwidth_gbps) == ("rtx-pro-6000-server", 1597.0)
    assert cfg.scheduler.max_num_batched_tokens == 2048


def test_shipped_tensor_parallel_config():
    """Qwen3-32B at TP 2 over PCIe: the TP degree comes from meta.json, the context from the
    model preset (the short meta.json records no max_model_len)."""
    cfg = load_config(ROOT / "configs" / "measured" / "rtxpro6000_qwen3_32b.yaml")
    assert cfg.parallel.tensor_parallel == 2 and cfg.gpu.interconnect == "pcie"
    assert cfg.gpu.name == "rtx-pro-6000-server"
    assert (cfg.model.name, cfg.model.max_model_len) == ("qwen3-32b", 40960)
    assert (cfg.scheduler.max_num_seqs, cfg.scheduler.max_num_batched_tokens) == (128, 2048)


def test_shipped_config_simulates(tmp_path):
    path = ROOT / "configs" / "measured" / "rtx4090_llama31_8b.yaml"
    cfg = load_config(path, ["workload.limit=40"])
    out = simulate(cfg, path.parent, check_invariants=True)
    assert out.summary["completed"] == 40 and out.sizing.num_blocks == 2588


def test_no_model_section_is_still_reported_missing(tmp_path):
    path = config(tmp_path, "")
    path.write_text(path.read_text().replace("model: llama-3-8b\n", ""))
    with pytest.raises(InputError, match="Field required") as info:
        load_config(path)
    assert info.value.field == "model"
