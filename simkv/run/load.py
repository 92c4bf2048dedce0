"""The one loader of a run config: :func:`simkv.config.sim.read_config` with a measured run's
engine settings filled in (:func:`apply_measured_engine`), for every command, the Python API,
sweeps, capacity searches and calibration alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simkv.config.base import YamlDoc, mapping_doc
from simkv.config.overrides import is_set, parent_of
from simkv.config.policy import traits_of
from simkv.config.sim import SimConfig, config_from_doc, read_config
from simkv.measured import check_single_engine, engine_overrides, read_engine_settings


def _measured_path(doc: YamlDoc) -> Path | None:
    """The measurement of a ``kind: measured`` workload with ``engine_settings`` on (else None);
    relative to the config file, and an :class:`InputError` at ``workload.path`` if missing."""
    workload = doc.data.get("workload")
    if not isinstance(workload, dict) or workload.get("kind") != "measured":
        return None
    path = workload.get("path")
    if workload.get("engine_settings", True) is not True or not isinstance(path, str):
        return None  # validation reports a bad flag or path
    resolved = doc.base_dir / path
    if not resolved.exists():
        raise doc.error_at(("workload", "path"), f"no such file or folder: {resolved}")
    return resolved


def _unset(data: dict[str, Any], fill: dict[str, object]) -> dict[str, object]:
    """The items of ``fill`` (dotted keys) that the document leaves unset and can take.

    Scheduler keys and ``kv_cache.prefix_caching`` apply only to schedulers that take a measured
    engine's settings (``SchedulerTraits.engine_defaults``: vllm_v1, the default; vLLM ≥ 0.8
    runs the V1 engine); ``kv_cache.num_blocks`` only when the config gives
    no ``capacity_gib`` and the block size in effect is the measured one; nothing goes into a
    required section the config leaves out (``model``: validation says it is missing).
    """
    sched = data.get("scheduler")
    traits = traits_of(sched.get("kind", "vllm_v1") if isinstance(sched, dict) else "vllm_v1")
    v1 = traits is not None and traits.engine_defaults
    kv = data.get("kv_cache") if isinstance(data.get("kv_cache"), dict) else {}
    same_blocks = kv.get("block_size") in (None, fill.get("kv_cache.block_size"))
    skip = set()
    if not v1:
        skip |= {key for key in fill if key.startswith("scheduler.")}
        skip.add("kv_cache.prefix_caching")
    if not same_blocks or kv.get("capacity_gib") is not None:
        skip.add("kv_cache.num_blocks")
    for key in fill:
        section = key.partition(".")[0]
        if is_set(data, key.split(".")) or (
            section not in data and SimConfig.model_fields[section].is_required()
        ):
            skip.add(key)
    return {key: value for key, value in fill.items() if key not in skip}


def apply_measured_engine(doc: YamlDoc) -> dict[str, object]:
    """Fill a ``kind: measured`` workload's engine settings
    (:func:`simkv.measured.engine_overrides`) into the keys the document leaves unset; run
    after ``--set``, so the file and ``--set`` both win. Returns what was filled.
    ``engine_settings: false`` in the workload turns this off.
    """
    path = _measured_path(doc) if isinstance(doc.data, dict) else None
    if path is None:
        return {}

    settings = read_engine_settings(path)
    check_single_engine(path, settings)
    fill = _unset(doc.data, engine_overrides(settings))
    for key, value in fill.items():
        keys = key.split(".")
        parent_of(doc.data, keys, SimConfig)[keys[-1]] = value
    return fill


def load_config(path: str | Path, overrides: list[str] | None = None) -> SimConfig:
    """Read, override and validate a run config (:func:`simkv.config.sim.read_config`); a
    ``kind: measured`` workload's engine settings fill the keys left unset
    (:func:`apply_measured_engine`). Errors are :class:`~simkv.errors.InputError` (file:line),
    every one at once."""
    return read_config(path, overrides, prepare=(apply_measured_engine,))


def config_of_mapping(
    data: dict[str, Any], base_dir: Path, overrides: list[str] | None = None
) -> SimConfig:
    """:func:`load_config` of a parsed config document built in Python: its relative paths
    resolve against ``base_dir``; its errors name the key path (it has no file or lines)."""
    doc = mapping_doc(data, base_dir)
    return config_from_doc(doc, overrides, prepare=(apply_measured_engine,))
