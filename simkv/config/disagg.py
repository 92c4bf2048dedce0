"""Prefill/decode disaggregation of a fleet: replica roles and the deciders of the
``fleet.disaggregation:`` section (:class:`simkv.config.fleet.DisaggregationConfig`).

A fleet whose replica groups have ``role: prefill`` and ``role: decode`` serves a request in
two places, as vLLM's P/D serving does (its ``NixlConnector`` behind a proxy such as llm-d's
or vLLM's ``disagg_proxy``): the fleet's ``router`` picks the replica that will serve it (a
``decode`` or a ``mixed`` one); on a decode replica the ``decider`` says whether the prompt is
prefilled remotely, on a prefill replica picked by ``prefill_router``, or locally; a remote
prefill's KV then crosses the ``link`` (:mod:`simkv.engine.disagg`). Every default lives here.
A decider is one class: a ``kind`` and a ``keeps_local`` method, added to :data:`DeciderConfig`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Literal

from pydantic import Field

from simkv.config.base import Frozen
from simkv.config.hardware import ModelSpec
from simkv.config.policy import VllmV1Config

Role = Literal["mixed", "prefill", "decode"]
"""What a replica group does: both phases (``mixed``, the default: colocated), only prompts
(``prefill``) or only what follows a prompt prefilled elsewhere (``decode``)."""


class AlwaysRemote(Frozen):
    """Every prompt routed to a decode replica is prefilled on a prefill replica."""

    kind: Literal["always"]

    def keeps_local(self, prompt_tokens: int, uncached: Callable[[], int]) -> bool:
        """Whether a prompt of ``prompt_tokens`` tokens, ``uncached()`` of them not in the
        decode replica's prefix cache (called only by the deciders that need it), is
        prefilled where it is decoded: never, here."""
        return False


class NeverRemote(Frozen):
    """Every prompt is prefilled where it is decoded (the decode pool runs colocated)."""

    kind: Literal["never"]

    def keeps_local(self, prompt_tokens: int, uncached: Callable[[], int]) -> bool:
        """Always (:meth:`AlwaysRemote.keeps_local`'s arguments)."""
        return True


class PromptThreshold(Frozen):
    """Prefill remotely when the prompt is longer than ``min_prompt_tokens`` (short prompts
    stay local, as Dynamo's conditional disaggregation and BLIS's decider keep them)."""

    kind: Literal["prompt_threshold"]
    min_prompt_tokens: int = Field(ge=0, le=10**7, description="longest prompt kept local")

    def keeps_local(self, prompt_tokens: int, uncached: Callable[[], int]) -> bool:
        """When the prompt has at most ``min_prompt_tokens`` tokens (``uncached`` unused)."""
        return prompt_tokens <= self.min_prompt_tokens


class PrefixHitThreshold(Frozen):
    """Prefill remotely when the tokens the decode replica would have to compute — the
    prompt less its prefix cached there — exceed ``min_uncached_tokens`` (Dynamo's
    disaggregated router: prefill length minus prefix hit against ``max_local_prefill_length``)."""

    kind: Literal["prefix_hit_threshold"]
    min_uncached_tokens: int = Field(ge=0, le=10**7, description="most uncached tokens kept local")

    def keeps_local(self, prompt_tokens: int, uncached: Callable[[], int]) -> bool:
        """When ``uncached()`` (the prompt less the decode replica's cached prefix, tokens) is
        at most ``min_uncached_tokens``."""
        return uncached() <= self.min_uncached_tokens


DeciderConfig = Annotated[
    AlwaysRemote | NeverRemote | PromptThreshold | PrefixHitThreshold,
    Field(discriminator="kind"),
]


def disagg_problems(
    roles: Sequence[str],
    disaggregation: bool,
    models: Sequence[ModelSpec],
    schedulers: Sequence[object],
) -> list[str]:
    """What makes a fleet's roles unrunnable, each message led by the key it is about: roles
    without ``fleet.disaggregation`` (``disaggregation``: whether it is given) or the
    reverse, one side without the other, pools of different models (``models``: each
    group's), and prefill or decode groups whose scheduler (``schedulers``: each group's
    config) is not vLLM V1 without async scheduling (vLLM's KV connectors are its V1
    engine's; simkv hands KV over at a request's finish, which async scheduling defers)."""
    split = [k for k, role in enumerate(roles) if role != "mixed"]
    if not split:
        if disaggregation:
            return ["fleet.disaggregation: no replica group has role prefill or decode"]
        return []
    problems = []
    if not disaggregation:
        problems.append(
            "fleet.replicas: prefill and decode groups need fleet.disaggregation (its link)"
        )
    for have, need in (("prefill", "decode"), ("decode", "prefill")):
        if have in roles and need not in roles:
            k = list(roles).index(have)
            problems.append(f"fleet.replicas.{k}.role: a {have} group needs a {need} group")
    first = split[0]
    for k in split:
        if models[k] != models[first]:
            problems.append(
                f"fleet.replicas.{k}.model: {models[k].name} differs from group {first}'s "
                f"{models[first].name}; prefill and decode pools serve one model"
            )
        sched = schedulers[k]
        if not isinstance(sched, VllmV1Config) or sched.async_scheduling:
            problems.append(
                f"fleet.replicas.{k}.scheduler: {roles[k]} replicas run kind vllm_v1 without "
                "async_scheduling (vLLM's KV connectors are its V1 engine's)"
            )
    return problems


def return_problems(roles: Sequence[str], caching: Sequence[str | None]) -> list[str]:
    """What makes ``return_kv: true`` pointless: a prefill group (``roles``, each group's)
    without a prefix cache (``caching``: each group's ``kv_cache.prefix_caching``; unset is
    vLLM V1's hash cache), where the returned KV would have nowhere to land."""
    return [
        f"fleet.disaggregation.return_kv: prefill group {k} has kv_cache.prefix_caching none; "
        "the returned KV lands in a prefill replica's prefix cache (hash or radix)"
        for k, (role, cache) in enumerate(zip(roles, caching, strict=True))
        if role == "prefill" and cache == "none"
    ]
