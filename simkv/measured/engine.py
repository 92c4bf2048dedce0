"""The simkv config values a measured engine's settings map to.

======================================  ===============================================
simkv key                               measured setting
======================================  ===============================================
``scheduler.max_num_seqs``              ``max_num_seqs``
``scheduler.max_num_batched_tokens``    ``max_num_batched_tokens``
``scheduler.enable_chunked_prefill``    ``enable_chunked_prefill``
``scheduler.reserve_full_prompt``       ``reserve_full_prompt`` (``scheduler_reserve_full_isl``)
``kv_cache.block_size``                 ``block_size``
``kv_cache.num_blocks``                 ``num_gpu_blocks``
``kv_cache.prefix_caching``             ``enable_prefix_caching``: ``hash`` / ``none``
``parallel.tensor_parallel``            ``tensor_parallel``
``model.max_model_len``                 ``max_model_len``
======================================  ===============================================

Settings the measurement did not record are left out. The model, GPU and dtypes have no key
here: a config names its model and GPU presets itself. :func:`simkv.run.load.load_config`
fills these values into a ``kind: measured`` config where the config leaves them unset.
"""

from __future__ import annotations

from simkv.measured.runs import EngineSettings, MeasuredRun


def engine_overrides(source: MeasuredRun | EngineSettings | None) -> dict[str, object]:
    """Dotted simkv config keys → the values the measured engine used (see the module table)."""
    settings = source.engine if isinstance(source, MeasuredRun) else source
    if settings is None:
        return {}
    caching = settings.enable_prefix_caching
    pairs: tuple[tuple[str, object], ...] = (
        ("scheduler.max_num_seqs", settings.max_num_seqs),
        ("scheduler.max_num_batched_tokens", settings.max_num_batched_tokens),
        ("scheduler.enable_chunked_prefill", settings.enable_chunked_prefill),
        ("scheduler.reserve_full_prompt", settings.reserve_full_prompt),
        ("kv_cache.block_size", settings.block_size),
        ("kv_cache.num_blocks", settings.num_gpu_blocks),
        ("kv_cache.prefix_caching", None if caching is None else "hash" if caching else "none"),
        ("parallel.tensor_parallel", settings.tensor_parallel),
        ("model.max_model_len", settings.max_model_len),
    )
    return {key: value for key, value in pairs if value is not None}
