"""The top-level run config (``simkv run CONFIG``): every default of a run lives in these models.

``load_config`` validates a YAML file once, applies ``--set key.path=value`` overrides, and
returns typed objects; internals never see raw dicts. The report prints
``config.resolved.yaml``: this model dumped with every default and preset filled in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import Field, TypeAdapter, ValidationError, model_validator

from simkv.config.base import Frozen, YamlDoc, load_yaml, one_error, validate
from simkv.config.cost import CostConfig, RooflineCostConfig
from simkv.config.disagg import disagg_problems, return_problems
from simkv.config.fleet import ENGINE_SECTIONS, MAX_REPLICAS, FleetConfig
from simkv.config.hardware import GpuSpec, ModelSpec
from simkv.config.host_eras import auto_era, with_host_era
from simkv.config.limits import FolderName
from simkv.config.overrides import set_items, set_items_all
from simkv.config.policy import (
    PreemptionConfig,
    SchedulerConfig,
    VllmV1Config,
    traits_of,
    v1_budget,
    v1_max_seqs,
)
from simkv.config.profile import expand_profile
from simkv.config.rules import RULE_SECTIONS, rule_problems
from simkv.config.sections import GIB, KVCacheConfig, ParallelConfig, SLOConfig
from simkv.config.workload import WorkloadConfig
from simkv.errors import InputError, all_of

__all__ = [
    "GIB", "KVCacheConfig", "ParallelConfig", "SLOConfig", "SimConfig", "apply_overrides",
    "apply_overrides_all", "config_from_doc", "dump_resolved", "located_in", "read_config",
    "rule_errors",
]  # fmt: skip


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
    fleet: FleetConfig | None = Field(
        None, description="replica groups behind a router; unset: one replica"
    )

    @model_validator(mode="before")
    @classmethod
    def _scheduler_kv_defaults(cls, data: Any) -> Any:
        """The ``kv_cache`` defaults that follow the scheduler's vLLM version (its traits):
        prefix caching (on under vLLM 0.11) and the free-block reuse order (LIFO under vLLM
        0.6, split under ``vllm_version: "0.32"``). The resolved config says which. A replica
        group that sets its own scheduler or ``kv_cache`` gets its scheduler's defaults for what
        it (or, inherited, the top level) leaves unset."""
        if not isinstance(data, dict):
            return data
        raw_kv = data.get("kv_cache")
        data = {**data, **_with_kv_defaults(data, raw_kv, data.get("scheduler"))}
        fleet = data.get("fleet")
        groups = fleet.get("replicas") if isinstance(fleet, dict) else None
        if isinstance(groups, list):
            filled = []
            for group in groups:
                # a section given as null is unset, as a dumped config writes it: the group
                # inherits it (a config dumped and read back runs as the original did)
                own_kv, own_sched = (
                    (group.get("kv_cache"), group.get("scheduler"))
                    if isinstance(group, dict) else (None, None)
                )  # fmt: skip
                if own_kv is not None or own_sched is not None:
                    kv = raw_kv if own_kv is None else own_kv
                    sched = data.get("scheduler") if own_sched is None else own_sched
                    group = {**group, **_with_kv_defaults(group, kv, sched)}
                filled.append(group)
            data["fleet"] = {**fleet, "replicas": filled}
        return data

    @model_validator(mode="after")
    def _policy_fits_scheduler(self) -> SimConfig:
        problems = rule_problems({name: getattr(self, name) for name in RULE_SECTIONS})
        if problems:  # the first; load_config reports them all (simkv.config.rules)
            raise ValueError(problems[0])
        if self.fleet is not None:
            if self.fleet.num_replicas > MAX_REPLICAS:
                raise ValueError(f"fleet.replicas: more than {MAX_REPLICAS} replicas in all")
            for k, cfg in enumerate(self.group_configs()):
                problems = rule_problems({name: getattr(cfg, name) for name in RULE_SECTIONS})
                if problems:
                    raise ValueError(f"fleet.replicas: group {k}: {problems[0]}")
            groups = self.group_configs()
            problems = disagg_problems(
                [group.role for group in self.fleet.replicas],
                self.fleet.disaggregation is not None,
                [cfg.model for cfg in groups], [cfg.scheduler for cfg in groups],
            )  # fmt: skip
            split = self.fleet.disaggregation
            if split is not None and split.return_kv:
                problems += return_problems(
                    [group.role for group in self.fleet.replicas],
                    [cfg.kv_cache.prefix_caching for cfg in groups],
                )
            if problems:
                raise ValueError(problems[0])
        return self._resolved()

    def _resolved(self) -> SimConfig:
        """Fill the defaults that depend on other sections, so the resolved config states
        them: a vLLM V1 budget, running-request cap and full-prompt reservation left unset
        (``VllmV1Config.max_num_batched_tokens``, ``max_num_seqs``, ``reserve_full_prompt``:
        the release's default), the victim policy left unset (``PreemptionConfig.victim``)
        and a roofline's ``host_era: auto`` with the host overheads it leaves unset
        (:func:`~simkv.config.host_eras.auto_era`). The model is frozen: the fields are set
        once, here, before anyone sees it."""
        sched, pre = self.scheduler, self.preemption
        if isinstance(sched, VllmV1Config) and None in (
            sched.max_num_batched_tokens,
            sched.max_num_seqs,
            sched.reserve_full_prompt,
        ):
            max_len = self.model.max_model_len
            filled = {
                "max_num_batched_tokens": v1_budget(sched, max_len),
                "max_num_seqs": v1_max_seqs(sched, max_len),
                "reserve_full_prompt": sched.reserves_full_prompt(),
            }
            object.__setattr__(self, "scheduler", sched.model_copy(update=filled))
        cost = self.cost_model
        if self.fleet is None and isinstance(cost, RooflineCostConfig) and cost.host_era == "auto":
            # the scheduler's host era (a fleet's groups each resolve theirs: group_configs)
            object.__setattr__(self, "cost_model", with_host_era(cost, auto_era(sched)))
        if pre.victim is None:
            policy = getattr(sched, "policy", "fcfs")
            victim = pre.victim_for(policy)
            object.__setattr__(self, "preemption", pre.model_copy(update={"victim": victim}))
        return self

    def group_configs(self) -> list[SimConfig]:
        """One config per replica group (this one without ``fleet`` and with the group's
        engine sections); ``[self]`` without a fleet."""
        if self.fleet is None:
            return [self]
        # (a copy runs no validator: each group fills its own scheduler's defaults)
        return [
            self.model_copy(update={
                "fleet": None,
                **{name: getattr(group, name) for name in ENGINE_SECTIONS
                   if getattr(group, name) is not None},
            })._resolved()
            for group in self.fleet.replicas
        ]  # fmt: skip


def _with_kv_defaults(data: dict[str, Any], kv: Any, sched: Any) -> dict[str, Any]:
    """``{"kv_cache": ...}`` with ``prefix_caching`` and ``reuse`` filled from the scheduler's
    traits where ``kv`` (a raw section) leaves them unset; ``{}`` when there is nothing to
    fill."""
    kv = dict(kv) if isinstance(kv, dict) else {} if kv is None else kv
    if not isinstance(kv, dict) or None not in (kv.get("prefix_caching"), kv.get("reuse")):
        return {}
    traits = traits_of(sched.get("kind", "vllm_v1") if isinstance(sched, dict) else "vllm_v1")
    if kv.get("prefix_caching") is None:
        kv["prefix_caching"] = "hash" if traits and traits.prefix_caching else "none"
    if kv.get("reuse") is None and traits is not None:
        kv["reuse"] = traits.reuse
        if isinstance(sched, dict) and sched.get("vllm_version") == "0.32":
            kv["reuse"] = "split"  # vLLM 0.32 v1/core/block_pool.py BlockPool.free_blocks
    return {"kv_cache": kv}


def apply_overrides(doc: YamlDoc, overrides: list[str]) -> None:
    """Apply ``--set key.path=value`` items to a run config's document in place
    (:func:`simkv.config.overrides.set_items`; a section the file leaves out starts from its
    default kind); :class:`InputError` for every item that cannot be applied."""
    set_items(doc, overrides, SimConfig)


def apply_overrides_all(doc: YamlDoc, overrides: list[str]) -> list[InputError]:
    """:func:`apply_overrides` that skips the items it cannot apply and returns their errors."""
    return set_items_all(doc, overrides, SimConfig)


def read_config(
    path: str | Path,
    overrides: list[str] | None = None,
    prepare: Sequence[Callable[[YamlDoc], object]] = (),
) -> SimConfig:
    """Read, override and validate a run config; errors are :class:`InputError` (file:line).

    ``prepare`` steps change the document after ``--set`` and before validation (the run
    layer's loader, :func:`simkv.run.load.load_config`, fills a measured engine's settings);
    ``cost_model: {profile: ...}`` is replaced by the calibration profile's values
    (:func:`simkv.config.profile.expand_profile`). Every error comes at once, one a line.
    """
    return config_from_doc(load_yaml(path), overrides, prepare)


def config_from_doc(
    doc: YamlDoc,
    overrides: list[str] | None = None,
    prepare: Sequence[Callable[[YamlDoc], object]] = (),
) -> SimConfig:
    """:func:`read_config` of a parsed document (a file's, or a mapping's:
    :func:`simkv.config.base.mapping_doc`); changes ``doc`` in place."""
    if not isinstance(doc.data, dict):
        raise InputError("a run config must be a mapping", file=doc.file or None, line=1)
    errors = apply_overrides_all(doc, overrides or [])
    for step in prepare:
        try:
            step(doc)
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
    data = SimConfig._scheduler_kv_defaults(dict(doc.data))
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
            else doc.error_at(_key_path(one.field), one.message)
            for one in lines
        ]  # fmt: skip
        raise all_of(located) from None


def _key_path(field: str) -> tuple[str | int, ...]:
    """A dotted field as a key path; digits are list indices (``fleet.replicas.1.kv_cache``)."""
    return tuple(int(part) if part.isdigit() else part for part in field.split("."))


def dump_resolved(cfg: SimConfig) -> str:
    """The fully resolved config (every default and preset value) as YAML."""
    data = cfg.model_dump(mode="json")
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
