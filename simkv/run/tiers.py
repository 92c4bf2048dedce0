"""Build a run's KV offload tiers (:mod:`simkv.config.tiers`) and attach them to its replicas.

Every replica gets its own ``kv_cache.tiers`` (a CPU tier per replica, a disk per replica);
``fleet.remote_tier`` is one store every replica shares, below its own tiers. All of them
move blocks over one :class:`~simkv.engine.tier_net.TierNet`, so a shared tier's bandwidth
is shared by the whole fleet.
"""

from __future__ import annotations

from simkv.config.sim import SimConfig
from simkv.config.tiers import TierConfig
from simkv.engine.engine import Engine, Environment
from simkv.engine.tier_net import TierNet
from simkv.engine.tiers import ReplicaTiers
from simkv.kv.tier_policies import make_policy
from simkv.kv.tier_store import TierStore
from simkv.run.inputs import GroupInputs
from simkv.workload.request import Workload


def block_bytes(group: GroupInputs) -> int:
    """Bytes of one block's KV in a whole replica of ``group``."""
    return group.sizing.block_size * group.config.model.kv_bytes_per_token


def _store(tier: TierConfig, nbytes: int) -> TierStore:
    capacity = tier.blocks(nbytes)
    return TierStore(capacity, make_policy(tier.eviction, capacity))


def attach_tiers(
    cfg: SimConfig,
    env: Environment,
    replicas: list[Engine],
    group_of: list[GroupInputs],
    workload: Workload,
) -> TierNet | None:
    """The run's tiers, each replica's scheduler given its :class:`ReplicaTiers` (its decode
    lane off: stores follow every step); None when the run has no tier."""
    remote = cfg.fleet.remote_tier if cfg.fleet is not None else None
    if remote is None and not any(g.config.kv_cache.tiers for g in group_of):
        return None
    nbytes = block_bytes(group_of[0])
    stores: list[TierStore] = []
    kinds: list[str] = []
    bps: list[tuple[float, float]] = []
    latency: list[float] = []
    own: list[list[int]] = []
    modes: list[list[bool]] = []

    def add(tier: TierConfig, group: GroupInputs) -> int:
        tp = group.config.parallel.tensor_parallel
        stores.append(_store(tier, block_bytes(group)))
        kinds.append(tier.kind)
        bps.append(tier.bandwidths(group.config.gpu.host_link_gbps, tp))
        latency.append(tier.latency_s)
        return len(stores) - 1

    for group in group_of:
        tiers = group.config.kv_cache.tiers
        own.append([add(tier, group) for tier in tiers])
        modes.append([tier.store == "on_evict" for tier in tiers])
    if remote is not None:
        shared = add(remote, group_of[0])
        for ids, mode in zip(own, modes, strict=True):
            ids.append(shared)
            mode.append(remote.store == "on_evict")
    host = [g.config.gpu.host_link_gbps * 1e9 * g.config.parallel.tensor_parallel for g in group_of]
    num_requests = len(replicas[0].arrival_s)
    net = TierNet(env, stores, kinds, bps, latency, host, nbytes, num_requests)
    pins = None if workload.pin_ttl_s is None else workload.pin_ttl_s.tolist()
    for r, engine in enumerate(replicas):
        if not own[r]:
            continue  # a group without tiers, in a fleet without a shared one
        sched = engine.scheduler
        tiers = ReplicaTiers(net, r, own[r], modes[r], sched.kv, sched.waiting)  # type: ignore[attr-defined]
        tiers.wake = engine.wake_up
        tiers.pin_ttl_s = pins
        first = group_of[r].config.kv_cache.tiers
        tiers.prompt_only = bool(first) and first[0].stored_blocks == "prompt"
        sched.tiers = tiers
        sched.lazy_decode(False)
    return net
