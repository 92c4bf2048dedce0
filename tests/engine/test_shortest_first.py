"""The shortest-first scheduler (the worked example of a new paged policy): its admission
order by hand, and its decode lane exact against the plain path."""

from __future__ import annotations

from pathlib import Path

import pytest

from simkv.config.policy import ShortestFirstConfig
from simkv.config.sim import SimConfig
from simkv.engine.registry import scheduler_class
from simkv.engine.schedulers.shortest_first import ShortestFirstScheduler
from tests.engine.helpers import run, tiny_config
from tests.engine.test_fastforward import _assert_same, _config


def test_the_registry_finds_it() -> None:
    assert scheduler_class(ShortestFirstConfig) is ShortestFirstScheduler


@pytest.mark.parametrize(
    ("kind", "first_token_s"),
    [
        # fewest tokens first: 2, then 6, then 12 (one request runs at a time)
        ("shortest_first", {1: 0.012, 2: 0.039, 0: 0.072}),
        # the same requests under vLLM V1's FCFS: in arrival order
        ("vllm_v1", {0: 0.022, 1: 0.045, 2: 0.072}),
    ],
)
def test_admission_order_by_hand(tmp_path: Path, kind: str, first_token_s: dict) -> None:
    """Three requests at t=0 (prompts 12, 2 and 6 tokens, 2 outputs each), one running at a
    time (``max_num_seqs: 1``); a step of n tokens takes 10 + n ms (vLLM V1's step rules,
    ``v1/core/sched/scheduler.py``: a prefill step then a decode step per request).
    Shortest first: request 1 prefills 2 tokens (12 ms) and decodes (11 ms), then request 2
    (16 + 11 ms), then request 0 (22 + 11 ms)."""
    reqs = [(0.0, 12, 2), (0.0, 2, 2), (0.0, 6, 2)]
    cfg = tiny_config(tmp_path, reqs, {"kind": kind, "max_num_seqs": 1}, num_blocks=8)
    out = run(cfg, tmp_path)
    got = out.frames.requests.set_index("req_id")["first_token_s"]
    assert {i: round(float(got[i]), 6) for i in first_token_s} == first_token_s


def test_lane_matches_the_plain_path_under_memory_pressure() -> None:
    """The inherited decode lane runs (and stays exact) under the new waiting order."""
    cfg = _config(3, 4.0, 2400, 16, "hash", 2048, 150, 120, "vllm_v1")
    data = cfg.model_dump(mode="json")
    data["scheduler"] = {**data["scheduler"], "kind": "shortest_first"}
    cfg = SimConfig.model_validate(data)
    assert _assert_same(cfg) > 500
