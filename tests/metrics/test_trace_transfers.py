"""A disaggregated fleet's trace has its KV transfers (simkv.metrics.trace_transfers):
hand-computed spans, tracks that never overlap, the window and the request limit respected,
and nothing of it in a trace without disaggregation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simkv.metrics.trace import TraceWindow, trace_document, write_trace
from simkv.metrics.trace_transfers import TRANSFERS_PID, _lane
from simkv.run import simulate, write_run
from tests.engine.helpers import tiny_config
from tests.engine.test_disagg import _config

MS = 1e-3
KV_BYTES = 12 * 524_288  # a 12-token prompt of Llama-2-7B's shapes


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests.engine.test_disagg's backpressure scenario: two 12-token prompts prefilled at
    once on replicas 0 and 1 (22 ms); decode replica 2 takes request 0's KV at once (22 → 35
    ms), request 1's prefill replica holds its KV until 57 ms, sent by 70 ms."""
    root = tmp_path_factory.mktemp("pd-trace")
    cfg = _config(root, [(0.0, 12, 2), (0.0, 12, 2)], prefill=2, decode_blocks=5)
    write_run(simulate(cfg, root, check_invariants=True), root / "run")
    return root / "run"


def _transfers(doc: dict[str, Any]) -> tuple[dict[int, str], list[tuple[Any, ...]]]:
    """The transfer process's track names by tid, and its spans as (tid, name, start ms,
    end ms, args)."""
    mine = [e for e in doc["traceEvents"] if e["pid"] == TRANSFERS_PID]
    names = {e["tid"]: e["args"]["name"] for e in mine if e.get("name") == "thread_name"}
    spans = [(e["tid"], e["name"], round(e["ts"] / 1e3, 6), round((e["ts"] + e["dur"]) / 1e3, 6),
              e["args"]) for e in mine if e["ph"] == "X"]  # fmt: skip
    return names, spans


def test_the_transfers_and_the_held_kv_are_spans_of_their_own(run_dir: Path) -> None:
    doc = json.loads(write_trace(run_dir).read_text())  # read back from the folder
    names, spans = _transfers(doc)
    # both are on their way to replica 2 from 22 ms: two tracks of replica 2
    assert names == {1: "to replica 2", 2: "to replica 2 · lane 2"}
    prefill = pd.read_parquet(run_dir / "requests.parquet")["prefill_replica"].tolist()
    assert sorted(prefill) == [0, 1]
    args = {r: {"bytes": KV_BYTES, "prefill_replica": prefill[r], "decode_replica": 2}
            for r in (0, 1)}  # fmt: skip
    assert sorted(spans, key=lambda s: (s[0], s[2])) == [
        (1, "kv transfer r0", 22, 35, args[0]),
        (2, "kv held r1", 22, 57, args[1]),  # backpressure: no decode blocks until 57 ms
        (2, "kv transfer r1", 57, 70, args[1]),
    ]
    assert doc["otherData"]["kv_transfers"] == 2
    process = [e for e in doc["traceEvents"]
               if e["pid"] == TRANSFERS_PID and e.get("name") == "process_name"]  # fmt: skip
    assert [e["args"]["name"] for e in process] == ["KV transfers"]


def test_the_window_and_the_limit_keep_fewer_transfers(run_dir: Path) -> None:
    frames = _frames(run_dir)
    late = trace_document(frames, TraceWindow(from_s=40 * MS))
    assert [s[1] for s in _transfers(late)[1]] == ["kv held r1", "kv transfer r1"]
    assert late["otherData"]["kv_transfers"] == 1
    early = trace_document(frames, TraceWindow(to_s=10 * MS))  # before any hand-off
    assert _transfers(early)[1] == [] and early["otherData"]["kv_transfers"] == 0
    first = trace_document(frames, TraceWindow(limit=1))  # request 0's track only
    assert [s[1] for s in _transfers(first)[1]] == ["kv transfer r0"]


def _frames(run_dir: Path) -> Any:
    from simkv.metrics.files import read_frames

    return read_frames(run_dir)


def test_a_track_takes_the_first_lane_free() -> None:
    free_at: list[float] = []
    lanes = [_lane(free_at, a, b) for a, b in [(0, 5), (1, 2), (2, 3), (3, 9), (5, 6)]]
    assert lanes == [0, 1, 1, 1, 0] and free_at == [6, 9]


def test_a_trace_without_disaggregation_has_no_transfers(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, [(0.0, 4, 3)], {"kind": "vllm_v1"}, num_blocks=8)
    doc = trace_document(simulate(cfg, tmp_path).frames)
    assert {e["pid"] for e in doc["traceEvents"]} == {1, 2}
    assert "kv_transfers" not in doc["otherData"]
