"""engine_overrides: measured settings → dotted simkv config keys."""

from __future__ import annotations

from simkv.measured import EngineSettings, engine_overrides


def test_rtx4090(rtx4090):
    assert engine_overrides(rtx4090) == {
        "scheduler.max_num_seqs": 256,
        "scheduler.max_num_batched_tokens": 2048,
        "scheduler.enable_chunked_prefill": True,
        "scheduler.reserve_full_prompt": True,  # scheduler_reserve_full_isl
        "kv_cache.block_size": 16,
        "kv_cache.num_blocks": 2588,
        "kv_cache.prefix_caching": "hash",
        "parallel.tensor_parallel": 1,
        "model.max_model_len": 32768,
    }


def test_rtxpro6000_leaves_out_what_was_not_logged(rtxpro6000):
    assert engine_overrides(rtxpro6000) == {
        "scheduler.max_num_seqs": 128,
        "scheduler.max_num_batched_tokens": 2048,
        "parallel.tensor_parallel": 1,
    }


def test_settings_directly_and_none():
    assert engine_overrides(EngineSettings(enable_prefix_caching=False)) == {
        "kv_cache.prefix_caching": "none"
    }
    assert engine_overrides(None) == {}


def test_qwen3_32b_tensor_parallel_run(qwen3_32b):
    assert qwen3_32b.engine.tensor_parallel == 2
    assert qwen3_32b.engine.data_parallel == 1
    assert qwen3_32b.engine.expert_parallel is False
    assert engine_overrides(qwen3_32b)["parallel.tensor_parallel"] == 2
