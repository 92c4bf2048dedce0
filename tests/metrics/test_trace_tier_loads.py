"""KV-tier loads in the trace (simkv.metrics.trace_transfers.tier_load_events): one span per
load from its start to its end, on per-replica lanes that never overlap."""

from __future__ import annotations

import math

import pandas as pd

from simkv.metrics.trace_transfers import LOADS_PID, tier_load_events


def _requests() -> pd.DataFrame:
    nan = math.nan
    return pd.DataFrame({
        "req_id": [0, 1, 2, 3], "replica": [0, 0, 0, 1], "arrival_s": [0.0, 0.1, 0.2, 0.3],
        "tier_load_start_s": [0.010, 0.012, nan, 0.3], "tier_load_end_s": [0.020, 0.015, nan, 0.4],
        "hit_tokens_cpu": [32, 0, 0, 16], "hit_tokens_disk": [0, 48, 0, 0],
    })  # fmt: skip


def test_each_load_is_one_span_on_a_free_lane() -> None:
    events, shown = tier_load_events(_requests(), limit=10)
    assert shown == 3
    spans = {e["name"]: e for e in events if e["ph"] == "X"}
    assert set(spans) == {"tier load r0", "tier load r1", "tier load r3"}
    assert all(e["pid"] == LOADS_PID for e in events)
    r0, r1 = spans["tier load r0"], spans["tier load r1"]
    assert math.isclose(r0["ts"], 10_000) and math.isclose(r0["dur"], 10_000)
    assert r0["args"] == {"tokens_cpu": 32} and r1["args"] == {"tokens_disk": 48}
    assert r0["tid"] != r1["tid"]  # overlapping loads into replica 0 take two lanes
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"KV tier loads", "into replica 0", "into replica 0 · lane 2", "into replica 1"} <= names


def test_the_window_keeps_loads_that_overlap_it() -> None:
    _, shown = tier_load_events(_requests(), limit=10, from_s=0.018, to_s=0.35)
    assert shown == 2  # r0 (ends at 20 ms) and r3; r1 ended at 15 ms
