"""Routers: which replica of a fleet serves an arriving request. One small class per ``kind``.

A router class is registered for its config model (:mod:`simkv.config.fleet`) with
:func:`register`, as schedulers are (:mod:`simkv.engine.registry`), and implements
:class:`Router`: ``choose(i, now, view)`` returns a replica index in ``[0, view.size)``. It
reads the replicas only through the :class:`~simkv.engine.fleet_view.FleetView` (live or
stale loads, live prefix hits); its own state (a turn counter, a session table) is its own.
Ties go to the lowest index, so a run is deterministic; ``random`` draws from the generator
it is built with (the run's router stream, ``simkv.run.assemble.Stream.ROUTER``). Adding a
router: its config model in ``simkv/config/fleet.py`` (added to ``RouterConfig``), its class
here, its test in ``tests/engine/test_routers.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import numpy as np

from simkv.config.base import Frozen
from simkv.config.fleet import (
    LeastKVUsageRouter,
    LeastOutstandingRouter,
    PrefixAwareRouter,
    RandomRouter,
    RoundRobinRouter,
    SessionAffinityRouter,
    ShortestQueueTokensRouter,
    WeightedRouter,
)
from simkv.engine.fleet_view import FleetView
from simkv.workload.request import Workload


class Router(Protocol):
    """Chooses the replica of each arriving request (called once per request, at arrival)."""

    def choose(self, i: int, now: float, view: FleetView) -> int: ...


RouterFactory = Callable[[Frozen, np.random.Generator, Workload], Router]
_REGISTRY: dict[type[Frozen], RouterFactory] = {}
_C = TypeVar("_C")


def register(model: type[Frozen]) -> Callable[[_C], _C]:
    """Class decorator: the decorated router class runs router configs of ``model``; it is
    built as ``cls(cfg, rng, workload)``."""

    def add(cls: _C) -> _C:
        if model in _REGISTRY:
            raise ValueError(f"{model.__name__} already has a router: {_REGISTRY[model]}")
        _REGISTRY[model] = cls  # type: ignore[assignment]
        return cls

    return add


def build_router(cfg: Frozen, rng: np.random.Generator, workload: Workload) -> Router:
    """The router ``cfg`` (a ``fleet.router`` model) names."""
    try:
        factory = _REGISTRY[type(cfg)]
    except KeyError:
        raise LookupError(f"no router is registered for {type(cfg).__name__}") from None
    return factory(cfg, rng, workload)


def argmin(values: Sequence[float]) -> int:
    """Index of the smallest value, the lowest index among ties."""
    return min(range(len(values)), key=values.__getitem__)


class _LoadRouter:
    """A router that keeps no state of its own: it chooses from the view's loads alone."""

    def __init__(self, cfg: Frozen, rng: np.random.Generator, workload: Workload) -> None:
        """(Built as every router is; nothing to keep.)"""


@register(RoundRobinRouter)
class RoundRobin:
    """Replicas in turn: request k (in arrival order) goes to replica k mod n."""

    def __init__(self, cfg: Frozen, rng: np.random.Generator, workload: Workload) -> None:
        self._next = 0

    def choose(self, i: int, now: float, view: FleetView) -> int:
        r = self._next
        self._next = (r + 1) % view.size
        return r


@register(RandomRouter)
class Random:
    """A uniform draw from the run's router generator (seeded by the config's ``seed``)."""

    def __init__(self, cfg: Frozen, rng: np.random.Generator, workload: Workload) -> None:
        self._rng = rng

    def choose(self, i: int, now: float, view: FleetView) -> int:
        return int(self._rng.integers(view.size))


@register(LeastOutstandingRouter)
class LeastOutstanding(_LoadRouter):
    """The fewest outstanding requests."""

    def choose(self, i: int, now: float, view: FleetView) -> int:
        return argmin(view.loads()[0])


@register(LeastKVUsageRouter)
class LeastKVUsage(_LoadRouter):
    """The least-used KV pool; ties: fewest outstanding, then the lowest index."""

    def choose(self, i: int, now: float, view: FleetView) -> int:
        outstanding, _, usage = view.loads()
        return min(range(view.size), key=lambda r: (usage[r], outstanding[r]))


@register(ShortestQueueTokensRouter)
class ShortestQueueTokens(_LoadRouter):
    """The fewest outstanding tokens (prompt + output of routed, unfinished requests)."""

    def choose(self, i: int, now: float, view: FleetView) -> int:
        return argmin(view.loads()[1])


@register(PrefixAwareRouter)
class PrefixAware:
    """SGLang router's cache-aware rule (sgl-router ``CacheAwarePolicy``): balance first when
    the outstanding requests are imbalanced (``max − min > abs`` and ``max > rel × min``:
    the least loaded); else the longest cached prefix when it covers more than
    ``cache_threshold`` of the prompt (ties: fewer outstanding, lower index); else the
    least-used KV pool (SGLang: the replica with the smallest tree). SGLang's router matches
    its own approximate tree of routed text; here the replicas' real prefix caches. With
    ``tier_weights`` a prefix is scored by where it lives: HBM hits, then each KV tier's
    (:class:`~simkv.config.fleet.TierHitWeights`), each token times its weight."""

    def __init__(self, cfg: Frozen, rng: np.random.Generator, workload: Workload) -> None:
        if not isinstance(cfg, PrefixAwareRouter):
            raise TypeError(cfg)
        self.cfg = cfg
        weights = cfg.tier_weights
        self.tier_weights = None if weights is None else weights.model_dump()

    def choose(self, i: int, now: float, view: FleetView) -> int:
        cfg = self.cfg
        outstanding, _, usage = view.loads()
        most, least = max(outstanding), min(outstanding)
        if most - least > cfg.balance_abs_threshold and most > cfg.balance_rel_threshold * least:
            return argmin(outstanding)
        hits = view.prefix_tokens(i, now, self.tier_weights)
        best = min(range(view.size), key=lambda r: (-hits[r], outstanding[r]))
        if hits[best] > cfg.cache_threshold * view.prompt_tokens(i):
            return best
        return min(range(view.size), key=lambda r: (usage[r], outstanding[r]))


@register(SessionAffinityRouter)
class SessionAffinity:
    """Every later turn of a session to its first turn's replica; the first turn (and a
    request without a session) by the configured ``first`` rule."""

    def __init__(self, cfg: Frozen, rng: np.random.Generator, workload: Workload) -> None:
        if not isinstance(cfg, SessionAffinityRouter):
            raise TypeError(cfg)
        first = {
            "round_robin": RoundRobinRouter(kind="round_robin"),
            "least_outstanding": LeastOutstandingRouter(kind="least_outstanding"),
            "least_kv_usage": LeastKVUsageRouter(kind="least_kv_usage"),
        }[cfg.first]
        self._first = build_router(first, rng, workload)
        sessions = workload.session_id
        self._session = None if sessions is None else sessions.tolist()
        self._replica_of: dict[int, int] = {}

    def choose(self, i: int, now: float, view: FleetView) -> int:
        if self._session is None:
            return self._first.choose(i, now, view)
        session = self._session[i]
        r = self._replica_of.get(session)
        if r is None:
            r = self._replica_of[session] = self._first.choose(i, now, view)
        return r


@register(WeightedRouter)
class Weighted:
    """llm-d's scheduler: the highest ``Σ weight × score``, each score in [0, 1], 1 best:
    queue ``1 − outstanding / max``, kv_usage ``1 − usage``, prefix ``hit / prompt``,
    queue_tokens ``1 − tokens / max`` (a max of 0 scores every replica 1)."""

    def __init__(self, cfg: Frozen, rng: np.random.Generator, workload: Workload) -> None:
        if not isinstance(cfg, WeightedRouter):
            raise TypeError(cfg)
        self.w = cfg.weights
        weights = cfg.tier_weights
        self.tier_weights = None if weights is None else weights.model_dump()

    def choose(self, i: int, now: float, view: FleetView) -> int:
        w = self.w
        outstanding, tokens, usage = view.loads()
        scores = [w.kv_usage * (1.0 - u) for u in usage]
        for weight, load in ((w.queue, outstanding), (w.queue_tokens, tokens)):
            top = max(load)
            if weight and top:
                scores = [s + weight * (1.0 - x / top) for s, x in zip(scores, load, strict=True)]
            elif weight:
                scores = [s + weight for s in scores]
        prompt = view.prompt_tokens(i)
        if w.prefix and prompt:
            hits = view.prefix_tokens(i, now, self.tier_weights)
            scores = [s + w.prefix * h / prompt for s, h in zip(scores, hits, strict=True)]
        return min(range(view.size), key=lambda r: -scores[r])
