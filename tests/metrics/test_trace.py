"""The trace stays bounded: merged step windows and capped request tracks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simkv.metrics.trace import REPLICA_PID_BASE, engine_events, request_events, step_events


def _steps(n: int) -> pd.DataFrame:
    t = np.arange(n, dtype=float) * 0.01
    ones = np.ones(n, dtype=np.int64)
    return pd.DataFrame({"time_s": t, "duration_s": 0.01 + 0 * t, "prefill_tokens": ones,
                         "decode_tokens": 2 * ones, "batch_size": ones, "num_running": ones,
                         "num_waiting": 0 * ones, "blocks_used": ones, "preempted": 0 * ones,
                         "swap_out_blocks": 0 * ones, "swap_in_blocks": 0 * ones})  # fmt: skip


def test_steps_beyond_the_limit_merge_into_windows_keeping_totals() -> None:
    events, per_event = step_events(_steps(1_001), limit=100)
    spans = [e for e in events if e["ph"] == "X"]
    assert per_event == 11 and len(spans) == 91  # ceil(1001 / 100) = 11 per window
    assert sum(e["args"]["decode_tokens"] for e in spans) == 2_002
    assert spans[0]["name"] == "11 steps"
    assert abs(spans[-1]["ts"] + spans[-1]["dur"] - 10.01e6) < 1e-3


def test_request_tracks_are_capped_at_the_earliest_arrivals() -> None:
    n = 50
    req = pd.DataFrame({
        "req_id": np.arange(n), "arrival_s": np.arange(n)[::-1] * 1.0,
        "first_scheduled_s": np.arange(n)[::-1] + 0.5, "first_token_s": np.arange(n)[::-1] + 1.0,
        "finish_s": np.arange(n)[::-1] + 2.0, "status": ["finished"] * n,
        "preemptions": np.zeros(n, dtype=np.int64), "swaps": np.zeros(n, dtype=np.int64),
    })  # fmt: skip
    events = request_events(req, limit=10)
    tracks = {e["tid"] for e in events if e["ph"] == "X"}
    assert tracks == {int(i) + 1 for i in range(n - 10, n)}  # latest ids arrived first


def test_a_fleet_has_one_engine_process_per_replica() -> None:
    """Each replica's steps on its own process (no two replicas' steps on one track), the
    event limit shared among them."""
    steps = pd.concat([_steps(300).assign(replica=r) for r in (0, 1, 2)], ignore_index=True)
    events, per_event = engine_events(steps, limit=300)
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {REPLICA_PID_BASE + r: f"engine (replica {r})" for r in (0, 1, 2)}
    spans = [e for e in events if e["ph"] == "X"]
    assert per_event == 3 and len(spans) == 3 * 100  # 300 steps each, 100 events each
    for r in (0, 1, 2):
        mine = [e for e in spans if e["pid"] == REPLICA_PID_BASE + r]
        assert sum(e["args"]["decode_tokens"] for e in mine) == 600
    alone, _ = engine_events(_steps(10).assign(replica=0))
    assert {e["pid"] for e in alone} == {1}  # one replica: the single engine's process
