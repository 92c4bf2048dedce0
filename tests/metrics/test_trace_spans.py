"""A preempted request's track in the trace is split at its preemptions: hand-computed golden
runs (one recompute, one swap), and a property over random small runs that preempt: each
request's spans tile its lifetime, one preempted span per preemption."""

from __future__ import annotations

import tempfile
from itertools import pairwise
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simkv.metrics.files import FrameFormat, read_frames, write_frames
from simkv.metrics.recorder import PREEMPTION_COLUMNS, RunFrames
from simkv.metrics.trace import trace_document
from simkv.run import simulate
from tests.engine.helpers import tiny_config

# Two requests of 4-token prompts in 4 blocks of 4 tokens; vLLM V0, no watermark. A step of n
# tokens takes 10 + n ms. Step 1 [0, 18 ms) prefills both (8 tokens, one block each); step 2
# [18, 30) decodes both (each takes its second block: none left). At 30 ms request 0 needs a
# free block to decode (vLLM 0.6's worst case) and the newest, request 1, is preempted.
REQUESTS = [(0.0, 4, 9), (0.0, 4, 3)]
PREEMPTED_S = 0.030


def _run(tmp_path: Path, mode: str, requests: list[tuple[float, int, int]] = REQUESTS,
         scheduler: dict[str, Any] | None = None, num_blocks: int = 4) -> RunFrames:  # fmt: skip
    scheduler = scheduler or {"kind": "vllm_v0", "watermark": 0.0}
    cfg = tiny_config(tmp_path, requests, scheduler, num_blocks=num_blocks, max_model_len=16,
                      preemption={"mode": mode})  # fmt: skip
    if mode == "swap":  # CPU space for 2 blocks of 4 tokens
        cfg = cfg.model_copy(update={"kv_cache": cfg.kv_cache.model_copy(
            update={"swap_space_gib": 0.004})})  # fmt: skip
    return simulate(cfg, tmp_path, check_invariants=True).frames


def _tracks(doc: dict) -> dict[int, list[tuple[str, float, float]]]:
    """Each request's spans as (name, start_s, end_s), in time order."""
    tracks: dict[int, list[tuple[str, float, float]]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e["pid"] == 2:
            span = (e["name"], e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6)
            tracks.setdefault(e["tid"] - 1, []).append(span)
    return {r: sorted(spans, key=lambda s: s[1]) for r, spans in tracks.items()}


def _approx(spans: list[tuple[str, float, float]]) -> list[Any]:
    return [(name, pytest.approx(a, abs=1e-9), pytest.approx(b, abs=1e-9)) for name, a, b in spans]


def test_a_recompute_preemption_splits_the_track_at_its_times(tmp_path: Path) -> None:
    frames = _run(tmp_path, "recompute")
    # request 1 waits with 6 tokens (its prompt and 2 outputs); step 3 [30, 41) decodes request 0
    # alone (vLLM V0: nothing was swapped, but nothing fits: the waiting head needs 2 blocks);
    # step 4 [41, 57) re-admits request 1 and recomputes its 6 tokens: it samples its third
    # and last token at 57 ms.
    row = frames.preemptions.iloc[0]  # type: ignore[union-attr]
    assert len(frames.preemptions) == 1  # type: ignore[arg-type]
    assert (row["req_id"], row["kind"]) == (1, "recompute")
    assert [row["time_s"], row["resumed_s"], row["next_token_s"]] == pytest.approx(
        [PREEMPTED_S, 0.041, 0.057], abs=1e-12
    )
    doc = trace_document(frames)
    assert doc["otherData"]["preempted_spans"] == "split"
    assert _tracks(doc)[1] == _approx(
        [
            ("queued", 0, 0),
            ("prefill", 0, 0.018),
            ("decode", 0.018, 0.030),
            ("preempted (recompute)", 0.030, 0.041),
            ("recompute prefill", 0.041, 0.057),
            ("decode", 0.057, 0.057),
        ]
    )
    assert [s[0] for s in _tracks(doc)[0]] == ["queued", "prefill", "decode"]
    _check_tiles(doc, frames)


def test_a_swap_splits_the_track_at_the_swap_out_and_in_steps(tmp_path: Path) -> None:
    frames = _run(tmp_path, "swap")
    steps = frames.steps
    # the same preemption swaps request 1's 2 blocks out (step 3), and step 4 swaps them in
    # and decodes it; each of those steps also pays its blocks' transfer
    out_step = steps[steps["swap_out_blocks"] > 0]
    in_step = steps[steps["swap_in_blocks"] > 0]
    assert list(out_step["swap_out_blocks"]) == [2] and list(in_step["swap_in_blocks"]) == [2]
    transfer_s = float(out_step["duration_s"].iloc[0]) - 0.011  # 1 decode, then 2 blocks out
    assert transfer_s > 0
    assert float(in_step["duration_s"].iloc[0]) == pytest.approx(0.012 + transfer_s, abs=1e-12)
    swapped_in_s = 0.030 + 0.011 + transfer_s  # the step after the swap-out
    token_s = swapped_in_s + 0.012 + transfer_s  # 2 decodes, 2 blocks in
    assert float(out_step["time_s"].iloc[0]) == pytest.approx(PREEMPTED_S, abs=1e-12)
    row = frames.preemptions.iloc[0]  # type: ignore[union-attr]
    assert (row["req_id"], row["kind"]) == (1, "swap")
    assert [row["time_s"], row["resumed_s"], row["next_token_s"]] == pytest.approx(
        [PREEMPTED_S, swapped_in_s, token_s], abs=1e-12
    )
    doc = trace_document(frames)
    finish_s = float(frames.requests.set_index("req_id").at[1, "finish_s"])
    assert _tracks(doc)[1] == _approx(
        [
            ("queued", 0, 0),
            ("prefill", 0, 0.018),
            ("decode", 0.018, 0.030),
            ("swapped out", 0.030, swapped_in_s),
            ("swapped in", swapped_in_s, token_s),
            ("decode", token_s, finish_s),
        ]
    )
    _check_tiles(doc, frames)


def _check_tiles(doc: dict, frames: RunFrames) -> None:
    """Every request's spans tile [arrival_s, finish_s] without overlap, one preempted span
    (``args.preemption``, numbered from 1) per preemption."""
    tracks = _tracks(doc)
    numbered: dict[int, list[int]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e["pid"] == 2 and "preemption" in e.get("args", {}):
            numbered.setdefault(e["tid"] - 1, []).append(e["args"]["preemption"])
    for r in frames.requests.itertuples(index=False):
        spans = tracks[r.req_id]
        assert spans[0][1] == pytest.approx(r.arrival_s, abs=1e-9)
        assert spans[-1][2] == pytest.approx(r.finish_s, abs=1e-9)
        for (_, _, end), (_, start, _) in pairwise(spans):
            assert start == pytest.approx(end, abs=1e-9)  # no gap, no overlap
        assert all(a <= b + 1e-9 for _, a, b in spans)
        assert sorted(numbered.get(r.req_id, [])) == list(range(1, r.preemptions + 1))


@st.composite
def _scenarios(draw: st.DrawFn) -> tuple[list[tuple[float, int, int]], dict[str, Any], str, int]:
    n = draw(st.integers(2, 6))
    requests = [(draw(st.integers(0, 20)) / 1000, draw(st.integers(1, 12)),
                 draw(st.integers(1, 10))) for _ in range(n)]  # fmt: skip
    requests.sort()
    scheduler, mode = draw(st.sampled_from([
        ({"kind": "vllm_v0", "watermark": 0.0}, "recompute"),
        ({"kind": "vllm_v0", "watermark": 0.0}, "swap"),
        ({"kind": "vllm_v1", "max_num_batched_tokens": 16}, "recompute"),
        ({"kind": "vllm_v1", "max_num_batched_tokens": 16, "async_scheduling": True}, "recompute"),
    ]))  # fmt: skip
    return requests, scheduler, mode, draw(st.integers(5, 7))  # a request needs up to 4 (+ null)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenarios())
def test_spans_tile_each_request_and_count_its_preemptions(
    scenario: tuple[list[tuple[float, int, int]], dict[str, Any], str, int],
) -> None:
    requests, scheduler, mode, num_blocks = scenario
    with tempfile.TemporaryDirectory() as tmp:
        frames = _run(Path(tmp), mode, requests, scheduler, num_blocks)
    preemptions: pd.DataFrame = frames.preemptions  # type: ignore[assignment]
    per_request = preemptions.groupby("req_id").size()
    counted = frames.requests.set_index("req_id")["preemptions"]
    assert per_request.reindex(counted.index, fill_value=0).equals(counted)
    _check_tiles(trace_document(frames), frames)


@pytest.mark.parametrize("fmt", list(FrameFormat))
def test_the_preemptions_frame_reads_back_to_the_same_trace(
    tmp_path: Path, fmt: FrameFormat
) -> None:
    """Written as Parquet or CSV (NaN for never) and read back, the frame gives the same
    trace; a run without preemptions writes an empty frame of the same columns."""
    crowd = [(0.0, 9, 7), (0.0, 5, 9), (0.001, 12, 3), (0.002, 3, 10), (0.01, 14, 2)]
    frames = _run(tmp_path, "swap", crowd, num_blocks=5)  # one is aborted, swapped out
    assert frames.preemptions["resumed_s"].isna().any()  # type: ignore[index]
    (tmp_path / "run").mkdir()
    write_frames(frames, tmp_path / "run", fmt)
    back = read_frames(tmp_path / "run")
    assert trace_document(back) == trace_document(frames)
    calm = _run(tmp_path, "recompute", REQUESTS[:1])
    assert list(calm.preemptions.columns) == list(PREEMPTION_COLUMNS)  # type: ignore[union-attr]
    assert calm.preemptions.empty  # type: ignore[union-attr]
    (tmp_path / "calm").mkdir()
    write_frames(calm, tmp_path / "calm", fmt)
    assert read_frames(tmp_path / "calm").preemptions.empty  # type: ignore[union-attr]
