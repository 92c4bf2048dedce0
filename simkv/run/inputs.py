"""The checked inputs of a run: its workload and, for every replica group (the one engine of a
run without ``fleet:`` is a fleet of one group), the group's config and KV pool, checked as
vLLM checks an engine at start-up and for what would only stall.

:func:`check_inputs` is the one place these checks run, for a single engine and for every group
of a fleet alike; its errors come together, one a line, each naming its group in a fleet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simkv.config.limits import MAX_RUN_BLOCKS
from simkv.config.policy import OrcaConfig, VllmV1Config
from simkv.config.sim import SimConfig
from simkv.config.tiers import TierConfig
from simkv.engine.capacity import KVSizing
from simkv.errors import InputError, all_of
from simkv.run.sizing import kv_sizing, usable_blocks
from simkv.workload.build import build_workload
from simkv.workload.request import Workload


@dataclass(frozen=True)
class GroupInputs:
    """One replica group: its engine config (``fleet`` cleared, the group's sections in), its
    checked KV pool, its name and how many replicas run it."""

    config: SimConfig
    sizing: KVSizing
    name: str
    count: int


@dataclass(frozen=True)
class RunInputs:
    """A run's workload and replica groups, every check passed."""

    workload: Workload
    groups: list[GroupInputs]


def _check_fits_max_len(cfg: SimConfig, sizing: KVSizing) -> None:
    """As vLLM at start-up: one request of ``max_model_len`` tokens must fit in the KV cache."""
    paged = cfg.scheduler.traits.memory == "paged"
    if paged and sizing.token_slots < cfg.model.max_model_len:
        raise InputError(
            f"the KV cache holds {sizing.token_slots} tokens ({sizing.num_blocks} blocks of "
            f"{sizing.block_size}), less than max_model_len {cfg.model.max_model_len}; give it "
            "more memory or lower model.max_model_len",
            field="kv_cache",
        )


def check_kv(cfg: SimConfig) -> KVSizing:
    """The KV pool of one engine's ``cfg``, checked as vLLM checks it at start-up (it holds one
    request of ``max_model_len`` tokens under the paged schedulers), and its KV tiers."""
    sizing = kv_sizing(cfg)
    _check_fits_max_len(cfg, sizing)
    _check_tiers(cfg, cfg.kv_cache.tiers, sizing, "kv_cache.tiers")
    return sizing


def _check_tiers(cfg: SimConfig, tiers: list[TierConfig], sizing: KVSizing, key: str) -> None:
    """KV tiers need vLLM V1's scheduler with prefix caching (the offloading connector's
    engine), and each holds at least one block."""
    if not tiers:
        return
    if not isinstance(cfg.scheduler, VllmV1Config) or cfg.kv_cache.prefix_caching != "hash":
        raise InputError(
            "KV tiers need scheduler kind vllm_v1 with kv_cache.prefix_caching hash (vLLM's "
            "OffloadingConnector)", field=key,
        )  # fmt: skip
    nbytes = sizing.block_size * cfg.model.kv_bytes_per_token
    for k, tier in enumerate(tiers):
        if tier.blocks(nbytes) < 1:
            raise InputError(
                f"the {tier.kind} tier holds less than one block ({nbytes:,} bytes of "
                f"{cfg.model.name} KV at block size {sizing.block_size})",
                field=f"{key}.{k}.capacity_gib" if key.endswith("tiers") else f"{key}.capacity_gib",
            )


def _prompt_limit(cfg: SimConfig) -> tuple[int, str] | None:
    """(the longest prompt the scheduler can ever admit, the key that sets it), or None when
    any prompt below ``max_model_len`` can be admitted (vllm_v0 rejects longer ones; vllm_v1
    has a budget of at least ``max_model_len`` with chunked prefill off, as vLLM 0.11 requires:
    ``simkv.config.policy.v1_budget_problems``)."""
    sched = cfg.scheduler
    if isinstance(sched, OrcaConfig) and sched.max_num_batched_tokens is not None:
        return sched.max_num_batched_tokens, "scheduler.max_num_batched_tokens"
    return None


def check_schedulable(cfg: SimConfig, workload: Workload) -> None:
    """A config that can only stall is an input error found at start-up: a prompt longer than
    the scheduler can ever admit whole (no chunking) that no prefix-cache hit can shorten (the
    workload has no shared content or caching is off) would wait forever, and everything
    behind it. (Stalls that depend on the run, e.g. a recompute grown past the budget, are
    reported by the engine.)"""
    limit = _prompt_limit(cfg)
    caching = (cfg.kv_cache.prefix_caching or "none") != "none"
    if limit is None or (caching and workload.content is not None):
        return
    tokens, key = limit
    prompts = workload.prompt_tokens
    admissible = prompts[prompts < cfg.model.max_model_len]  # longer ones are rejected
    if admissible.size and int(admissible.max()) > tokens:
        longest = int(admissible.max())
        raise InputError(
            f"{tokens} tokens, but a prompt of {longest} tokens can never be scheduled whole "
            f"and the run would stall; raise {key.split('.')[-1]} to at least {longest}",
            field=key,
        )


def check_fits_longest(cfg: SimConfig, workload: Workload, sizing: KVSizing) -> None:
    """A request whose KV (prompt plus output, as truncated to ``max_model_len``, less the
    last sampled token) needs more blocks than the usable pool could never finish: it would
    preempt itself forever. vLLM's start-up check counts the null block as room
    (``kv_cache_utils.check_enough_kv_cache_memory``), so a pool of exactly ``max_model_len``
    tokens passes it and a longest request then stalls; simkv refuses such a config."""
    if cfg.scheduler.traits.memory != "paged":
        return
    max_len, bs = cfg.model.max_model_len, sizing.block_size
    prompts = workload.prompt_tokens.astype(np.int64)
    total = np.minimum(prompts + workload.output_tokens, max_len)[prompts < max_len]
    longest = int(total.max()) if total.size else 1
    need = max(1, -(-(longest - 1) // bs))
    usable = usable_blocks(cfg, sizing)
    if need > usable:
        null = cfg.scheduler.traits.null_block
        held = " (one is vLLM V1's null block)" if null else ""
        why = (
            f"a request of {longest} tokens needs {need} and could never finish"
            if total.size
            else "no request could run"
        )
        raise InputError(
            f"{sizing.num_blocks} blocks{held} leave {usable} for requests, but {why} (the "
            f"run would stall); give the KV cache at least {need + null} blocks or lower "
            "model.max_model_len",
            field="kv_cache",
        )


def _check_group(group: SimConfig, workload: Workload | None) -> KVSizing:
    """One group's KV pool, then (given the workload) its schedulability and room for its
    longest request; raises the group's errors together."""
    errors: list[InputError] = []
    sizing = None
    try:
        sizing = check_kv(group)
    except InputError as err:
        errors.append(err)
    if workload is not None:
        try:
            check_schedulable(group, workload)
            if sizing is not None:
                check_fits_longest(group, workload, sizing)
        except InputError as err:
            errors.append(err)
    if errors or sizing is None:
        raise all_of(errors)
    return sizing


def _in_group(cfg: SimConfig, k: int, err: InputError) -> InputError:
    """An error of group ``k`` of a fleet, naming the group, located at the group's own section
    when it gives one, else at the top-level key it inherits."""
    field = err.field
    section = field.partition(".")[0] if field else ""
    group = cfg.fleet.replicas[k] if cfg.fleet is not None else None
    if field and group is not None and getattr(group, section, None) is not None:
        field = f"fleet.replicas.{k}.{field}"
    return InputError(f"replica group {k}: {err.message}", field=field)


def check_groups(cfg: SimConfig, workload: Workload | None = None) -> list[GroupInputs]:
    """Every replica group of ``cfg`` checked (:func:`_check_group`); the errors of all groups
    together, each naming its group in a fleet."""
    groups, errors = [], []
    specs = cfg.fleet.replicas if cfg.fleet is not None else None
    for k, group in enumerate(cfg.group_configs()):
        try:
            sizing = _check_group(group, workload)
        except InputError as err:
            lines = [err, *err.also]
            errors += [err] if specs is None else [_in_group(cfg, k, one) for one in lines]
            continue
        name = (specs[k].name or f"g{k}") if specs is not None else cfg.name
        groups.append(GroupInputs(group, sizing, name, specs[k].count if specs else 1))
    if errors:
        raise all_of(errors)
    _check_run_blocks(cfg, groups)
    _check_remote_tier(cfg, groups)
    return groups


def _check_remote_tier(cfg: SimConfig, groups: list[GroupInputs]) -> None:
    """A fleet's shared tier: every group can use it (as :func:`_check_tiers`), with blocks
    of one size (the same model and block size)."""
    tier = cfg.fleet.remote_tier if cfg.fleet is not None else None
    if tier is None:
        return
    for group in groups:
        _check_tiers(group.config, [tier], group.sizing, "fleet.remote_tier")
    sizes = {(g.sizing.block_size, g.config.model.kv_bytes_per_token) for g in groups}
    if len(sizes) > 1:
        raise InputError(
            "a shared tier needs every replica group on one model and block size",
            field="fleet.remote_tier",
        )


def _check_run_blocks(cfg: SimConfig, groups: list[GroupInputs]) -> None:
    """:class:`InputError` when the run's replicas would allocate more than
    :data:`MAX_RUN_BLOCKS` KV blocks together (GPU blocks, and swap blocks where they swap)."""
    blocks = [
        g.sizing.num_blocks + (g.sizing.swap_blocks if g.config.scheduler.traits.swap else 0)
        for g in groups
    ]
    total = sum(g.count * b for g, b in zip(groups, blocks, strict=True))
    if total <= MAX_RUN_BLOCKS:
        return
    terms = " + ".join(f"{g.count} × {b:,}" for g, b in zip(groups, blocks, strict=True))
    raise InputError(
        f"the run would allocate {total:,} KV blocks ({terms} per replica), more than "
        f"{MAX_RUN_BLOCKS:,} (about 56 bytes each, simkv.config.limits.MAX_RUN_BLOCKS): use "
        "fewer replicas, a larger kv_cache.block_size or a smaller KV cache",
        field="fleet.replicas" if cfg.fleet is not None else "kv_cache",
    )


def check_inputs(cfg: SimConfig, base_dir: Path, workload: Workload | None = None) -> RunInputs:
    """The workload (built from ``cfg.workload`` with the run's workload stream unless given)
    and every replica group, checked; the errors of the workload's files, every group's KV
    pool and schedulability are raised together, one a line."""
    errors: list[InputError] = []
    if workload is None:
        try:
            workload = build_workload(cfg.workload, np.random.default_rng(cfg.seed), base_dir)
        except InputError as err:
            errors.append(err)
    try:
        groups = check_groups(cfg, workload)
    except InputError as err:
        errors.append(err)
    if errors or workload is None:
        raise all_of(errors)
    return RunInputs(workload, groups)
