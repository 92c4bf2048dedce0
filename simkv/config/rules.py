"""Rules over several sections of a run config, each a message naming the key it is about.

:class:`~simkv.config.sim.SimConfig` checks them once its sections are valid (and reports the
first); :func:`simkv.run.load.load_config` checks them again over every section that is
valid on its own, so a config with a bad field elsewhere still gets every rule's error at once.
A rule whose sections are not all valid (or absent: ``None``) is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simkv.config.cost import RooflineCostConfig, UnknownClock, latency_scale
from simkv.config.hardware import ModelSpec
from simkv.config.policy import (
    VllmV0Config,
    VllmV1Config,
    kinds_with,
    v0_budget_problems,
    v1_budget_problems,
)
from simkv.config.workload import check_sampling_scheduler

RULE_SECTIONS = (
    "workload", "model", "gpu", "parallel", "kv_cache", "scheduler", "preemption", "cost_model",
)  # fmt: skip
"""The sections the rules read."""


def tensor_parallel_problems(tp: int, model: ModelSpec) -> list[str]:
    """vLLM's rule: TP divides the attention heads; KV heads are split (TP divides them) or
    replicated (they divide TP)."""
    heads, kv_heads = model.num_attention_heads, model.num_kv_heads
    if heads % tp:
        return [f"parallel.tensor_parallel {tp} must divide the model's {heads} attention heads"]
    if kv_heads % tp and tp % kv_heads:
        return [
            f"parallel.tensor_parallel {tp} and the model's {kv_heads} KV heads: one must "
            "divide the other"
        ]
    return []


def rule_problems(sections: Mapping[str, Any]) -> list[str]:
    """Every rule broken by ``sections`` (validated section objects by name, None if invalid)."""
    sched, kv, pre = sections.get("scheduler"), sections.get("kv_cache"), sections.get("preemption")
    workload, parallel, model = (sections.get(k) for k in ("workload", "parallel", "model"))
    kind = sched.kind if sched is not None else None
    traits = sched.traits if sched is not None else None
    problems = []
    caching = kv is not None and kv.prefix_caching not in (None, "none")
    if traits is not None and not traits.prefix_caching and caching:
        problems.append(f"kv_cache.prefix_caching needs scheduler {kinds_with('prefix_caching')}")
    paged = traits is not None and traits.memory == "paged"
    if paged and not traits.swap and pre is not None and pre.mode == "swap":
        problems.append(f"preemption.mode swap: {kind} preempts by recompute only")
    if kind is not None and workload is not None:
        try:
            check_sampling_scheduler(workload, kind)
        except ValueError as err:
            problems.append(str(err))
    if paged and not traits.priority_victim and pre is not None and pre.victim == "lowest_priority":
        problems.append(
            f"preemption.victim lowest_priority needs scheduler {kinds_with('priority_victim')}"
        )
    if parallel is not None and model is not None:
        problems += tensor_parallel_problems(parallel.tensor_parallel, model)
    cost, gpu = sections.get("cost_model"), sections.get("gpu")
    if isinstance(cost, RooflineCostConfig) and gpu is not None:
        try:
            latency_scale(cost, gpu)
        except UnknownClock as err:
            problems.append(err.message)
    if isinstance(sched, VllmV1Config) and model is not None:
        problems += v1_budget_problems(sched, model.max_model_len)
    if isinstance(sched, VllmV0Config) and model is not None:
        problems += v0_budget_problems(sched, model.max_model_len)
    return problems
