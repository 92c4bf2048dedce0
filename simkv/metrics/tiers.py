"""What a run's KV offload tiers did (:mod:`simkv.engine.tiers`): where each request's prefix
came from, what crossed each tier's link, and how full each tier was.

Per request (:func:`with_tiers`, columns beside the usual ones): ``hit_tokens_<kind>`` (tokens
loaded from each kind of tier), ``tier_load_start_s`` / ``tier_load_end_s`` (its load; NaN:
none) and ``tier_load_ms``. ``prefix_hit_tokens`` counts every prompt token found at the
first admission, in HBM or a tier: its HBM part is ``prefix_hit_tokens`` less the tier hits.

Summary (:func:`tier_summary`), per tier kind: ``tier_hit_rate_<kind>`` (tokens it supplied /
prompt tokens of admitted requests), ``tier_hit_requests_<kind>``, ``tier_loaded_bytes_<kind>``,
``tier_stored_bytes_<kind>``, ``tier_evicted_blocks_<kind>``, ``tier_dropped_blocks_<kind>``,
``tier_capacity_blocks_<kind>`` (a kind's tiers summed over the replicas);
and ``tier_loads``, ``tier_load_ms_mean`` / ``_p50`` / ``_p99`` (the load time on the TTFT
path of the requests that loaded).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class TierTotals:
    """Per tier of a run (in the run's tier order): its kind, bytes loaded from it and stored
    in it, blocks evicted, stores dropped, and its capacity in blocks."""

    kinds: list[str]
    loaded_bytes: list[int]
    stored_bytes: list[int]
    evicted: list[int]
    dropped: list[int]
    capacity: list[int]


def with_tiers(requests: pd.DataFrame, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """``requests`` with the tier ``columns`` (by request id; module docstring)."""
    ids = requests["req_id"].to_numpy()
    out = requests.copy()
    for name, column in columns.items():
        out[name] = column[ids]
    out["tier_load_ms"] = (out["tier_load_end_s"] - out["tier_load_start_s"]) * 1e3
    return out


def tier_kinds(requests: pd.DataFrame) -> list[str]:
    """The tier kinds a run's requests frame has columns for, in order."""
    return [c.removeprefix("hit_tokens_") for c in requests.columns if c.startswith("hit_tokens_")]


def tier_summary(requests: pd.DataFrame, net: TierTotals) -> dict[str, float | int | None]:
    """The summary's tier figures (module docstring)."""
    admitted = requests[requests["first_scheduled_s"].notna()]
    prompts = int(admitted["prompt_tokens"].sum())
    out: dict[str, float | int | None] = {}
    for kind in tier_kinds(requests):
        hits = admitted[f"hit_tokens_{kind}"]
        ids = [t for t, k in enumerate(net.kinds) if k == kind]
        out[f"tier_hit_rate_{kind}"] = int(hits.sum()) / prompts if prompts else None
        out[f"tier_hit_requests_{kind}"] = int((hits > 0).sum())
        out[f"tier_loaded_bytes_{kind}"] = sum(net.loaded_bytes[t] for t in ids)
        out[f"tier_stored_bytes_{kind}"] = sum(net.stored_bytes[t] for t in ids)
        out[f"tier_evicted_blocks_{kind}"] = sum(net.evicted[t] for t in ids)
        out[f"tier_dropped_blocks_{kind}"] = sum(net.dropped[t] for t in ids)
        out[f"tier_capacity_blocks_{kind}"] = sum(net.capacity[t] for t in ids)
    loads = requests["tier_load_ms"].dropna().to_numpy()
    out["tier_loads"] = len(loads)
    stats = {"mean": np.mean, "p50": np.median, "p99": lambda x: np.percentile(x, 99)}
    for name, stat in stats.items():
        out[f"tier_load_ms_{name}"] = float(stat(loads)) if len(loads) else None
    return out


def prefix_sources(requests: pd.DataFrame) -> pd.DataFrame:
    """Each admitted request's prompt by where its KV came from: ``hbm``, each tier kind and
    ``computed`` (tokens), in arrival order: the report's stacked view."""
    admitted = requests[requests["first_scheduled_s"].notna()].sort_values("arrival_s")
    kinds = tier_kinds(requests)
    tiers = {kind: admitted[f"hit_tokens_{kind}"].to_numpy() for kind in kinds}
    loaded = sum(tiers.values(), np.zeros(len(admitted), dtype=np.int64))
    found = admitted["prefix_hit_tokens"].fillna(0).to_numpy().astype(np.int64)
    hbm = np.maximum(found - loaded, 0)
    computed = admitted["prompt_tokens"].to_numpy() - np.minimum(found, loaded + hbm)
    return pd.DataFrame(
        {"arrival_s": admitted["arrival_s"].to_numpy(), "hbm": hbm, **tiers,
         "computed": np.maximum(computed, 0)},
        index=admitted.index,
    )  # fmt: skip
