"""The frames and summary figures of a fleet with prefill/decode disaggregation
(:mod:`simkv.engine.disagg`).

The combined ``requests`` frame has one row per request, the one its serving replica
(``decode`` or ``mixed``) recorded, plus the path of its KV (:data:`PATH_COLUMNS`):

* ``prefill_replica``: the prefill replica that ran its prompt, -1 when it was prefilled where
  it was served;
* ``prefill_scheduled_s``: when that replica first scheduled it (NaN if local);
* ``kv_handoff_s``: its prefill ended there and its KV was held;
* ``kv_send_s``: its decode replica reserved blocks for the KV: the transfer began;
* ``kv_arrive_s``: the transfer ended; ``kv_bytes``: the bytes it moved (the prompt beyond the
  decode replica's cached prefix × the model's KV bytes per token).

A remotely prefilled request's TTFT (``first_token_s − arrival_s``, the decode replica samples
the first token the client sees) splits exactly into :data:`TTFT_PARTS`, whose means over the
remotely prefilled requests that produced a first token are ``mean_ttft_<part>_ms``:

* ``prefill_queue``: arrival to first scheduled on the prefill replica;
* ``prefill``: first scheduled to the prefill's end there;
* ``kv_wait``: the prefill's end to the decode replica's reservation (backpressure: the prefill
  replica holds the KV meanwhile), ``max(0, kv_send_s − kv_handoff_s)``;
* ``transfer``: the transfer itself (link latency, then the bytes at a fair share of the NICs)
  from the later of its start and the prefill's end, ``kv_arrive_s − max(kv_send_s,
  kv_handoff_s)``: with a layer-wise link the transfer may start before the prefill ends, and
  only its tail beyond the prefill adds to the TTFT;
* ``decode_queue``: the KV's arrival to the decode replica scheduling the request;
* ``decode_step``: that first step (the last prompt token recomputed, the first token sampled).

Summary keys besides: ``remote_prefill_frac`` (share of requests prefilled remotely),
``kv_transfer_bytes`` (total, prefill to decode), ``kv_transfers``, and ``link_busy_frac``
(the mean over NICs that sent or received of the share of the run a transfer was moving bytes
on them).

With the return path (``return_kv: true``, :mod:`simkv.engine.kv_return`) the frame has
:data:`RETURN_COLUMNS` besides: ``prefill_hit_tokens`` (the prompt tokens its prefill replica
found in its prefix cache, 0 if local), ``kv_return_send_s`` and ``kv_return_arrive_s`` (its KV
sent back after its finish: NaN when not) and ``kv_return_bytes``; and the summary has
``prefill_prefix_hit_frac`` (Σ ``prefill_hit_tokens`` / Σ ``prompt_tokens`` over the remotely
prefilled requests), ``kv_returns``, ``kv_return_bytes`` (decode to prefill) and
``kv_returns_dropped`` (returns whose prefill replica had no free blocks).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simkv.metrics.recorder import RunFrames

PATH_COLUMNS = (
    "prefill_replica", "prefill_scheduled_s", "kv_handoff_s", "kv_send_s", "kv_arrive_s",
    "kv_bytes",
)  # fmt: skip
"""The columns a disaggregated fleet adds to its requests frame."""

RETURN_COLUMNS = ("prefill_hit_tokens", "kv_return_send_s", "kv_return_arrive_s", "kv_return_bytes")
"""The columns the return path (``return_kv: true``) adds besides."""

TTFT_PARTS = ("prefill_queue", "prefill", "kv_wait", "transfer", "decode_queue", "decode_step")
"""The parts of a remotely prefilled request's TTFT, in order (they sum to it)."""


def with_paths(
    requests: pd.DataFrame, frames: list[RunFrames], paths: dict[str, np.ndarray]
) -> pd.DataFrame:
    """``requests`` (sorted by ``req_id``) with :data:`PATH_COLUMNS`: ``paths`` holds every
    column but ``prefill_scheduled_s`` by request id; that one comes from the prefill
    replicas' own frames (``frames``, by replica)."""
    ids = requests["req_id"].to_numpy()
    prefill_of = paths["prefill_replica"]
    scheduled = np.full(len(prefill_of), np.nan)
    returns = "kv_return_bytes" in paths
    hits = np.zeros(len(prefill_of), dtype=np.int64)
    for r in np.unique(prefill_of[prefill_of >= 0]):
        legs = frames[int(r)].requests
        scheduled[legs["req_id"].to_numpy()] = legs["first_scheduled_s"].to_numpy()
        if returns:
            hits[legs["req_id"].to_numpy()] = legs["prefix_hit_tokens"].to_numpy()
    out = requests.copy()
    for name in PATH_COLUMNS:
        column = scheduled if name == "prefill_scheduled_s" else paths[name]
        out[name] = column[ids]
    if returns:
        for name in RETURN_COLUMNS:
            out[name] = (hits if name == "prefill_hit_tokens" else paths[name])[ids]
    return out


def prompt_end_s(requests: pd.DataFrame) -> pd.Series:
    """Each request's first token as DistServe and splitwise-sim count it, at its prompt's end
    (s): ``kv_handoff_s`` for a remotely prefilled request (its prefill replica made a token
    there), else ``first_token_s``. simkv's own TTFT is vLLM's P/D one, at the decode replica."""
    if "kv_handoff_s" not in requests:
        return requests["first_token_s"]
    return requests["kv_handoff_s"].fillna(requests["first_token_s"])


def ttft_parts(requests: pd.DataFrame) -> pd.DataFrame:
    """Each remotely prefilled request's TTFT parts (:data:`TTFT_PARTS`, seconds), for the
    rows whose first token came."""
    rows = requests[(requests["prefill_replica"] >= 0) & requests["first_token_s"].notna()]
    marks = [
        rows[name].to_numpy()
        for name in ("arrival_s", "prefill_scheduled_s", "kv_handoff_s", "kv_send_s",
                     "kv_arrive_s", "first_scheduled_s", "first_token_s")
    ]  # fmt: skip
    marks[3] = np.maximum(marks[2], marks[3])  # (a layer-wise transfer may start earlier)
    spans = zip(TTFT_PARTS, marks[:-1], marks[1:], strict=True)
    return pd.DataFrame({part: end - begin for part, begin, end in spans}, index=rows.index)


def disagg_summary(
    requests: pd.DataFrame,
    nic_busy_s: list[float],
    duration_s: float | None,
    returns_dropped: int = 0,
) -> dict[str, float | None]:
    """The summary figures of the module docstring; ``nic_busy_s``: the busy time of every
    NIC that carried a transfer (egress and ingress sides, returns included);
    ``returns_dropped``: the return path's dropped returns."""
    remote = requests["prefill_replica"].to_numpy() >= 0
    parts = ttft_parts(requests)
    out: dict[str, float | None] = {
        "remote_prefill_frac": float(remote.mean()) if len(remote) else None,
        "kv_transfers": int(np.isfinite(requests["kv_arrive_s"].to_numpy()).sum()),
        "kv_transfer_bytes": int(requests["kv_bytes"].sum()),
    }
    for part in TTFT_PARTS:
        out[f"mean_ttft_{part}_ms"] = float(parts[part].mean()) * 1e3 if len(parts) else None
    busy = [s for s in nic_busy_s if s > 0]
    out["link_busy_frac"] = float(np.mean(busy)) / duration_s if busy and duration_s else None
    if "kv_return_bytes" in requests:
        out.update(return_summary(requests, returns_dropped))
    return out


def return_summary(requests: pd.DataFrame, dropped: int) -> dict[str, float | None]:
    """The return path's summary keys (module docstring); ``dropped``: the returns a prefill
    replica had no free blocks for."""
    rows = requests[requests["prefill_replica"].to_numpy() >= 0]
    prompts = int(rows["prompt_tokens"].sum())
    return {
        "prefill_prefix_hit_frac": int(rows["prefill_hit_tokens"].sum()) / prompts
        if prompts
        else None,
        "kv_returns": int(np.isfinite(requests["kv_return_arrive_s"].to_numpy()).sum()),
        "kv_return_bytes": int(requests["kv_return_bytes"].sum()),
        "kv_returns_dropped": dropped,
    }
