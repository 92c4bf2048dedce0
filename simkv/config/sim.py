"""The top-level run config (``simkv run CONFIG``): every default of a run lives in these models.

``load_config`` validates a YAML file once, applies ``--set key.path=value`` overrides, and
returns typed objects; internals never see raw dicts. The report prints
``config.resolved.yaml``: this model dumped with every default and preset filled in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, TypeAdapter, ValidationError, model_validator

from simkv.config.base import Frozen, YamlDoc, load_yaml, one_error, validate
from simkv.config.cost import CostConfig, RooflineCostConfig
from simkv.config.hardware import GpuSpec, ModelSpec
from simkv.config.limits import (
    MAX_BLOCKS,
    MAX_GPU_GIB,
    MAX_SWAP_GIB,
    MAX_TP,
    FolderName,
    Tokens,
)
from simkv.config.policy import PreemptionConfig, SchedulerConfig, VllmV1Config
from simkv.config.profile import expand_profile
from simkv.config.rules import RULE_SECTIONS, rule_problems
from simkv.config.safe_yaml import load_bounded
from simkv.config.workload import WorkloadConfig
from simkv.errors import InputError, all_of

GIB = 1 << 30


class ParallelConfig(Frozen):
    """Model parallelism."""

    tensor_parallel: int = Field(
        1,
        ge=1,
        le=MAX_TP,
        description="GPUs per model replica (TP degree); as vLLM, it divides the model's "
        "attention heads, and its KV heads divide it or it divides them",
    )


class KVCacheConfig(Frozen):
    """The paged KV cache. Capacity: ``num_blocks`` or ``capacity_gib`` if given, else derived
    as GPU memory × utilization − weights − activation reserve (per GPU)."""

    block_size: Tokens = Field(16, description="tokens per block (vLLM default 16)")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="vLLM default 0.9")
    activation_reserve_gib: float = Field(
        1.0,
        ge=0,
        le=MAX_GPU_GIB,
        description="per-GPU activation/workspace memory kept out of the KV pool, GiB",
    )
    num_blocks: int | None = Field(
        None, ge=1, le=MAX_BLOCKS, description="GPU blocks, given directly (≤ 2^26)"
    )
    capacity_gib: float | None = Field(
        None, gt=0, le=MAX_GPU_GIB, description="KV GiB per GPU, given directly (≤ 1024)"
    )
    swap_space_gib: float = Field(
        4.0, ge=0, le=MAX_SWAP_GIB, description="CPU swap space per GPU, GiB (vLLM v0: 4)"
    )
    reuse: str = Field("fifo", pattern="^(fifo|lifo)$", description="freed-block reuse order")
    prefix_caching: Literal["none", "hash", "radix"] | None = Field(
        None,
        description="none; hash = vLLM 0.11 automatic prefix caching; radix = SGLang-style "
        "radix cache at block granularity. Unset: hash under vllm_v1 (vLLM 0.11's default), "
        "none otherwise",
    )

    @model_validator(mode="after")
    def _one_capacity(self) -> KVCacheConfig:
        if self.num_blocks is not None and self.capacity_gib is not None:
            raise ValueError("give num_blocks or capacity_gib, not both")
        return self


class SLOConfig(Frozen):
    """Service-level objectives for ``request_goodput`` (a request is good if it meets all)."""

    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    e2el_ms: float | None = Field(None, gt=0)


class SimConfig(Frozen):
    """One simulation run: workload → engine (scheduler ⇄ KV memory, cost model) → metrics."""

    name: FolderName = Field("run", description="run (folder) name")
    seed: int = Field(0, ge=0, description="seed of the run's numpy Generator")
    workload: WorkloadConfig
    model: ModelSpec = Field(description="preset name, {preset: name, **overrides} or inline")
    gpu: GpuSpec = Field(description="preset name, {preset: name, **overrides} or inline")
    parallel: ParallelConfig = ParallelConfig()
    kv_cache: KVCacheConfig = KVCacheConfig()
    scheduler: SchedulerConfig = VllmV1Config(kind="vllm_v1")
    preemption: PreemptionConfig = PreemptionConfig()
    cost_model: CostConfig = RooflineCostConfig(kind="roofline")
    slo: SLOConfig = SLOConfig()

    @model_validator(mode="before")
    @classmethod
    def _default_prefix_caching(cls, data: Any) -> Any:
        """vLLM 0.11 enables prefix caching by default; the resolved config says so."""
        if not isinstance(data, dict):
            return data
        kv = data.get("kv_cache")
        kv = dict(kv) if isinstance(kv, dict) else {} if kv is None else kv
        if isinstance(kv, dict) and kv.get("prefix_caching") is None:
            sched = data.get("scheduler")
            kind = sched.get("kind", "vllm_v1") if isinstance(sched, dict) else "vllm_v1"
            kv["prefix_caching"] = "hash" if kind == "vllm_v1" else "none"
            data = {**data, "kv_cache": kv}
        return data

    @model_validator(mode="after")
    def _policy_fits_scheduler(self) -> SimConfig:
        problems = rule_problems({name: getattr(self, name) for name in RULE_SECTIONS})
        if problems:  # the first; load_config reports them all (simkv.config.rules)
            raise ValueError(problems[0])
        return self


def _parse_override(item: str) -> tuple[list[str], Any]:
    key, sep, raw = item.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_0-9][\w]*)*", key):
        raise InputError(f"expected key.path=value, got {item!r}", file="--set")
    try:
        value = load_bounded(raw, "--set")[0] if raw else ""
    except yaml.YAMLError:
        value = raw
    except InputError as err:  # beyond the loader's limits
        raise InputError(err.message, file="--set", field=key) from None
    return key.split("."), value


def _default_section(key: str) -> dict[str, Any]:
    """A top-level section the document leaves out, as ``--set`` starts it: its default
    ``kind`` only (the other defaults come from validation), so that switching the kind with
    ``--set scheduler.kind=orca`` starts from the new kind's defaults."""
    field = SimConfig.model_fields.get(key)
    default = getattr(field, "default", None)
    kind = getattr(default, "kind", None)
    return {"kind": kind} if isinstance(kind, str) else {}


def _parent_of(data: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """The mapping that holds ``keys[-1]``, made along the way: a top-level section the
    document leaves out starts from its default, a preset name becomes ``{preset: name}``."""
    node = data
    for depth, key in enumerate(keys[:-1]):
        if depth == 0 and key not in node:
            node[key] = _default_section(key)
        child = node.get(key)
        if isinstance(child, str):  # e.g. model: llama-2-7b  →  {preset: llama-2-7b}
            child = {"preset": child}
        if not isinstance(child, dict):
            child = {}
        node[key] = child
        node = child
    return node


def _is_set(data: Any, keys: list[str]) -> bool:
    """Whether the document itself gives a value at ``keys``."""
    for key in keys:
        if not isinstance(data, dict) or data.get(key) is None:
            return False
        data = data[key]
    return True


def apply_overrides(doc: YamlDoc, overrides: list[str]) -> None:
    """Apply ``--set key.path=value`` items (values parsed as YAML) to the document in place.

    A section the file leaves out starts from its default kind (``--set cost_model.x=1`` keeps
    the default ``kind``). The key paths set are noted in ``doc.set_paths`` (errors there are
    blamed on ``--set``).
    """
    errors = apply_overrides_all(doc, overrides)
    if errors:
        raise all_of(errors)


def apply_overrides_all(doc: YamlDoc, overrides: list[str]) -> list[InputError]:
    """:func:`apply_overrides` that skips the items it cannot apply and returns their errors."""
    errors = []
    for item in overrides:
        try:
            keys, value = _parse_override(item)
        except InputError as err:
            errors.append(err)
            continue
        if isinstance(doc.data, dict):
            _parent_of(doc.data, keys)[keys[-1]] = value
            doc.set_paths.add(tuple(keys))
    return errors


def _measured_path(doc: YamlDoc) -> Path | None:
    """The measurement of a ``kind: measured`` workload with ``engine_settings`` on (else None);
    relative to the config file, and an :class:`InputError` at ``workload.path`` if missing."""
    workload = doc.data.get("workload")
    if not isinstance(workload, dict) or workload.get("kind") != "measured":
        return None
    path = workload.get("path")
    if workload.get("engine_settings", True) is not True or not isinstance(path, str):
        return None  # validation reports a bad flag or path
    resolved = Path(doc.file).parent / path
    if not resolved.exists():
        raise doc.error_at(("workload", "path"), f"no such file or folder: {resolved}")
    return resolved


def _unset(data: dict[str, Any], fill: dict[str, object]) -> dict[str, object]:
    """The items of ``fill`` (dotted keys) that the document leaves unset and can take.

    Scheduler keys and ``kv_cache.prefix_caching`` apply only to the vllm_v1 scheduler (the
    default; vLLM ≥ 0.8 runs the V1 engine); ``kv_cache.num_blocks`` only when the config gives
    no ``capacity_gib`` and the block size in effect is the measured one; nothing goes into a
    required section the config leaves out (``model``: validation says it is missing).
    """
    sched = data.get("scheduler")
    v1 = not isinstance(sched, dict) or sched.get("kind", "vllm_v1") == "vllm_v1"
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
        if _is_set(data, key.split(".")) or (
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
    # imported here: simkv.measured summarises runs with simkv.metrics.summary, which imports
    # this module
    from simkv.measured import engine_overrides, read_engine_settings

    fill = _unset(doc.data, engine_overrides(read_engine_settings(path)))
    for key, value in fill.items():
        keys = key.split(".")
        _parent_of(doc.data, keys)[keys[-1]] = value
    return fill


def load_config(path: str | Path, overrides: list[str] | None = None) -> SimConfig:
    """Read, override and validate a run config; errors are :class:`InputError` (file:line).

    A ``kind: measured`` workload's engine settings fill the keys left unset
    (:func:`apply_measured_engine`); ``cost_model: {profile: ...}`` is replaced by the
    calibration profile's values (:func:`simkv.config.profile.expand_profile`).
    """
    doc = load_yaml(path)
    if not isinstance(doc.data, dict):
        raise InputError("a run config must be a mapping", file=path, line=1)
    errors = apply_overrides_all(doc, overrides or [])
    try:
        apply_measured_engine(doc)
    except InputError as err:  # a missing measurement: validation still reports the rest
        errors.append(err)
    try:
        expand_profile(doc)
    except InputError as err:
        errors.append(err)
        doc.data["cost_model"] = {k: v for k, v in doc.data["cost_model"].items() if k != "profile"}
    try:
        cfg = validate(SimConfig, doc)
    except InputError as err:
        errors += [err, *rule_errors(doc)]
    if errors:
        raise all_of(errors)
    return cfg


@cache
def _section_adapter(name: str) -> TypeAdapter[Any]:
    """Validates one top-level section of :class:`SimConfig` on its own."""
    field = SimConfig.model_fields[name]
    if field.metadata:  # a discriminated union keeps its discriminator
        return TypeAdapter(Annotated[(field.annotation, *field.metadata)])  # type: ignore[misc]
    return TypeAdapter(field.annotation)


def rule_errors(doc: YamlDoc) -> list[InputError]:
    """The errors of :mod:`simkv.config.rules` over the sections of ``doc`` that are valid on
    their own (located as validation locates them)."""
    data = SimConfig._default_prefix_caching(dict(doc.data))
    sections: dict[str, Any] = {}
    for name in RULE_SECTIONS:
        field = SimConfig.model_fields[name]
        if name not in data:
            sections[name] = None if field.is_required() else field.default
            continue
        try:
            sections[name] = _section_adapter(name).validate_python(data[name])
        except ValidationError:
            sections[name] = None
    items = [{"loc": (), "type": "value_error", "msg": msg} for msg in rule_problems(sections)]
    return [one_error(item, doc, SimConfig) for item in items]


@contextmanager
def located_in(path: str | Path, overrides: list[str]) -> Iterator[None]:
    """Give each line of an :class:`InputError` raised after validation (say, by KV sizing)
    that names a config key but no file the place of that key: ``--set`` if an override wrote
    it, else ``file:line`` in the config."""
    try:
        yield
    except InputError as err:
        lines = [err, *err.also]
        if all(one.file is not None or one.field is None for one in lines):
            raise
        doc = load_yaml(path)
        apply_overrides_all(doc, overrides)
        located = [
            one if one.file is not None or one.field is None
            else doc.error_at(tuple(one.field.split(".")), one.message)
            for one in lines
        ]  # fmt: skip
        raise all_of(located) from None


def dump_resolved(cfg: SimConfig) -> str:
    """The fully resolved config (every default and preset value) as YAML."""
    data = cfg.model_dump(mode="json")
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
