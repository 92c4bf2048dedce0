"""simkv beside splitwise-sim (benchmarks/splitwise_sim.py): the reference's metrics from a
requests frame, hand-computed; light-load prompt times agreeing with splitwise-sim's own
figures; the doc written only when asked."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import load_benchmark

bench = load_benchmark("splitwise_sim")


def test_metrics_measure_ttft_to_the_prompts_end_as_splitwise_sim_does() -> None:
    # request 0 disaggregated: prompt ends at 0.3 s, the decode replica's first token at 0.5 s;
    # request 1 colocated (no hand-over): its first token is its prompt's end
    requests = pd.DataFrame({
        "status": ["finished", "finished"], "arrival_s": [0.0, 1.0],
        "kv_handoff_s": [0.3, np.nan], "first_token_s": [0.5, 1.2], "finish_s": [2.3, 2.2],
        "output_tokens": [11, 5],
    })  # fmt: skip
    steps = pd.DataFrame({"prefill_tokens": [100, 0, 0], "decode_tokens": [0, 2, 4],
                          "batch_size": [1, 2, 4], "duration_s": [0.1, 0.04, 0.06],
                          "preempted": [0, 1, 0]})  # fmt: skip
    row = bench.metrics(requests, steps)
    assert row["ttft_p50_ms"] == pytest.approx(250.0)  # 300 and 200 ms
    assert row["own_ttft_p50_ms"] == pytest.approx(350.0)  # 500 and 200 ms
    assert row["tbt_p50_ms"] == pytest.approx((200.0 + 250.0) / 2)  # 2000/10, 1000/4
    assert row["e2e_p99_ms"] == pytest.approx(1200 + 0.99 * 1100)  # linear, 2 values
    assert row["throughput_rps"] == pytest.approx(2 / 2.3)
    assert row["decode_batch"] == 3 and row["decode_step_ms"] == pytest.approx(50.0)
    assert row["preempted"] == 1


def test_light_load_prompts_agree_with_splitwise_sim(tmp_path: Path) -> None:
    # 2 prompt : 2 token machines at the trace's own rate: nothing queues for the prompt
    # machines, so TTFT is the table's prompt time in both simulators
    ref = bench.reference()
    rows = ref[(ref["prompt_machines"] == 2) & (ref["token_machines"] == 2) & (ref["rate"] == "x1")
               & (ref["prompt_sku"] == "dgx-a100")]  # fmt: skip
    want = next(rows.itertuples(index=False))
    got = bench.run(want, True, tmp_path)
    assert got["requests_finished"] == want.requests_finished == 1000
    assert got["ttft_p50_ms"] == pytest.approx(want.ttft_p50_ms, rel=0.02)
    # the decode price is where they part (the doc's first explanation): simkv's is dearer
    assert got["tbt_p50_ms"] > 1.2 * want.tbt_p50_ms


@pytest.mark.parametrize("write", [False, True])
def test_writes_its_doc_only_when_asked(
    write: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(bench, "compare", lambda folder: pd.DataFrame())
    monkeypatch.setattr(bench, "render", lambda df, wall, cpu: "# simkv beside splitwise-sim\n")
    monkeypatch.setattr(bench, "DOC", tmp_path / "splitwise-sim.md")
    monkeypatch.setattr(sys, "argv", ["splitwise_sim.py", *(["--write-docs"] if write else [])])
    bench.main()
    assert "# simkv beside splitwise-sim" in capsys.readouterr().out
    assert (tmp_path / "splitwise-sim.md").exists() is write
