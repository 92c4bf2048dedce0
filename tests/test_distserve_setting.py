"""benchmarks/distserve_setting.py: DistServe's attainment on hand-made request frames (the
first token at the prefill's end or at the decode replica), its length filter, the prompts
beyond a TTFT's reach, and the layouts the split plan gives."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import load_benchmark

ds = load_benchmark("distserve_setting")


def _frame(**extra: list[float]) -> pd.DataFrame:
    """Two finished requests arriving at 0: 11 tokens each, the last at 1.0 s and 2.2 s."""
    data = {"arrival_s": [0.0, 0.0], "first_token_s": [0.2, 0.3], "finish_s": [1.0, 2.2],
            "generated_tokens": [11, 11], "status": ["finished", "finished"], **extra}  # fmt: skip
    return pd.DataFrame(data)


def test_attainment_joins_both_objectives() -> None:
    """TTFT 200 / 300 ms, TPOT (1.0 - 0.2) / 10 = 80 ms and (2.2 - 0.3) / 10 = 190 ms."""
    met = ds.attainment(_frame(), ttft_ms=250.0, tpot_ms=100.0, at_prefill=True)
    assert met == {"ttft": 0.5, "tpot": 0.5, "both": 0.5}
    met = ds.attainment(_frame(), ttft_ms=350.0, tpot_ms=100.0, at_prefill=True)
    assert met == {"ttft": 1.0, "tpot": 0.5, "both": 0.5}


def test_first_token_at_the_prefill_moves_the_wait_into_tpot() -> None:
    """Prefill ends at 0.1 s and 0.15 s: DistServe's TTFT 100 / 150 ms, TPOT 90 / 205 ms."""
    frame = _frame(kv_handoff_s=[0.1, 0.15])
    assert ds.attainment(frame, 120.0, 100.0, at_prefill=True) == {
        "ttft": 0.5, "tpot": 0.5, "both": 0.5}  # fmt: skip
    assert ds.attainment(frame, 120.0, 100.0, at_prefill=False)["ttft"] == 0.0


def test_an_unfinished_request_meets_nothing() -> None:
    frame = _frame()
    frame.loc[1, "status"] = "rejected"
    assert ds.attainment(frame, 1e9, 1e9, at_prefill=True)["both"] == 0.5


def test_lengths_follow_distserves_filter(tmp_path: Path) -> None:
    data = pd.read_csv(ds.write_lengths(tmp_path))
    total = data["num_prefill_tokens"] + data["num_decode_tokens"]
    assert len(data) == 14561 and total.max() < ds.CONTEXT_TOKENS
    short = (data["num_prefill_tokens"] < 4) & (data["num_decode_tokens"] < 4)
    assert not short.any()


def test_beyond_reach_prices_the_prompt_alone(tmp_path: Path) -> None:
    """TP 1 of the profile: 22.05 + 0.1405 p + 8.08e-6 p² ms; 1,000 tokens take 170.7 ms."""
    path = tmp_path / "l.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens\n1000,5\n2000,5\n")
    assert ds.beyond_reach(path, 2, 1, 170.0) == 1.0
    assert ds.beyond_reach(path, 2, 1, 171.0) == 0.5
    assert math.isclose(ds.beyond_reach(path, 1, 1, 171.0), 0.0)


@pytest.mark.parametrize("requests", [50])
def test_layouts_are_distserves_splits_and_vllm(tmp_path: Path, requests: int) -> None:
    names = [s.name for s in ds.layouts(ds.write_config(tmp_path, requests))]
    assert names == ["p1tp1-d2tp1", "p2tp1-d1tp1", "p1tp2-d1tp1", "vllm-1", "vllm-3"]
