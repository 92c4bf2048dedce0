"""Preemptions and swaps in the trace: instant markers at the steps that did them, and (frames
without a ``preemptions`` frame, as an older run folder's) the unsplit decode span of a
preempted or swapped request named so; a time window and a request limit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from simkv.metrics.trace import TraceWindow, trace_document
from simkv.run import simulate
from tests.engine.helpers import tiny_config

# six requests into 5 blocks of 4 tokens: they cannot all fit, so vLLM V0 swaps some out
REQUESTS = [(0.0, 9, 7), (0.0, 5, 9), (0.001, 12, 3), (0.002, 3, 10), (0.01, 14, 2), (0.01, 1, 1)]


def _frames(tmp_path: Path, mode: str):  # type: ignore[no-untyped-def]
    cfg = tiny_config(tmp_path, REQUESTS, {"kind": "vllm_v0", "watermark": 0.0}, num_blocks=5,
                      max_model_len=16, preemption={"mode": mode})  # fmt: skip
    if mode == "swap":
        kv = cfg.kv_cache.model_copy(update={"swap_space_gib": 0.004})  # 2 blocks of 4
        cfg = cfg.model_copy(update={"kv_cache": kv})
    return simulate(cfg, tmp_path).frames


def _markers(doc: dict, name: str) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == "i" and e["name"] == name]


def test_preemptions_are_marked_at_their_steps_and_name_the_decode_span(tmp_path: Path) -> None:
    frames = replace(_frames(tmp_path, "recompute"), preemptions=None)  # not recorded
    steps, requests = frames.steps, frames.requests
    assert steps["preempted"].sum() > 0  # the scenario preempts
    doc = trace_document(frames)
    assert doc["otherData"]["preempted_spans"] == "unsplit"
    marks = _markers(doc, "preemption")
    hit = steps[steps["preempted"] > 0]
    assert [m["ts"] for m in marks] == list(hit["time_s"] * 1e6)
    assert [m["args"]["requests"] for m in marks] == list(hit["preempted"])
    assert all(m["pid"] == 1 and m["tid"] == 1 and m["s"] == "t" for m in marks)
    decode = {e["tid"] - 1: e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 2
              and e["name"].startswith("decode")}  # fmt: skip
    for r in requests.itertuples():
        if r.preemptions and r.req_id in decode:
            assert decode[r.req_id]["name"] == f"decode (preempted {r.preemptions}×)"
            assert decode[r.req_id]["args"]["preemptions"] == r.preemptions
    assert any(r.preemptions for r in requests.itertuples())


def test_swaps_are_marked_out_and_in(tmp_path: Path) -> None:
    frames = replace(_frames(tmp_path, "swap"), preemptions=None)
    steps = frames.steps
    assert steps["swap_out_blocks"].sum() > 0
    doc = trace_document(frames)
    for name, column in (("swap out", "swap_out_blocks"), ("swap in", "swap_in_blocks")):
        marks = _markers(doc, name)
        assert sum(m["args"]["blocks"] for m in marks) == steps[column].sum()
        assert len(marks) == (steps[column] > 0).sum()
    names = {e["tid"] - 1: e["name"] for e in doc["traceEvents"] if e["ph"] == "X"
             and e["pid"] == 2 and e["name"].startswith("decode")}  # fmt: skip
    swapped = frames.requests[frames.requests["swaps"] > 0]
    assert not swapped.empty
    for r in swapped.itertuples():
        assert names[r.req_id] == f"decode (preempted {r.preemptions}×, {r.swaps} by swap)"


def test_a_window_keeps_what_overlaps_it_and_the_limit_caps_tracks(tmp_path: Path) -> None:
    frames = _frames(tmp_path, "recompute")
    steps = frames.steps
    step = steps.iloc[len(steps) // 2]
    mid = float(step["time_s"] + step["duration_s"] / 2)  # inside one step only
    doc = trace_document(frames, TraceWindow(from_s=mid, to_s=mid))
    kept = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 1]
    assert [e["ts"] for e in kept] == [step["time_s"] * 1e6]
    req = frames.requests
    present = req[(req["arrival_s"] <= mid) & (req["finish_s"] >= mid)]
    tracks = {e["tid"] - 1 for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 2}
    assert tracks == set(present["req_id"]) and len(tracks) < len(req)
    capped = trace_document(frames, TraceWindow(limit=2))
    tracks = {e["tid"] for e in capped["traceEvents"] if e["ph"] == "X" and e["pid"] == 2}
    assert len(tracks) == 2 and capped["otherData"]["requests_left_out"] == len(req) - 2
