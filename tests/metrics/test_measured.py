"""measured_metrics: simkv's conventions, checked against the source project's own numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simkv.measured import MeasuredRun
from simkv.metrics.measured import measured_metrics
from tests.measured.conftest import QWEN3_32B, RTX4090, RTXPRO6000

ROWS = {"TTFT": "ttft", "TPOT": "tpot", "Latency": "e2el"}
STATS = {"Mean": "mean", "Median": "median", "P90": "p90", "P99": "p99"}


def vllm_column(folder) -> dict[str, float]:
    """The "vLLM" column of llmservingsim_validation_summary.txt, under simkv's key names."""
    out = {}
    for line in (folder / "llmservingsim_validation_summary.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[0] in ROWS and parts[1] in STATS:
            out[f"{STATS[parts[1]]}_{ROWS[parts[0]]}_ms"] = float(parts[2])
    return out


@pytest.mark.parametrize(
    ("folder", "fixture"),
    [(RTX4090, "rtx4090"), (RTXPRO6000, "rtxpro6000"), (QWEN3_32B, "qwen3_32b")],
)
def test_golden_values_of_the_validation_summary(folder, fixture, request):
    golden = vllm_column(folder)
    assert len(golden) == 12
    metrics = measured_metrics(request.getfixturevalue(fixture))
    for key, value in golden.items():
        assert metrics[key] == pytest.approx(value, abs=0.1), key


def test_rtx4090_headline_numbers(rtx4090):
    m = measured_metrics(rtx4090)
    assert m["mean_ttft_ms"] == pytest.approx(65456.6, abs=0.1)
    assert m["median_tpot_ms"] == pytest.approx(30.8, abs=0.1)
    assert m["num_requests"] == m["completed"] == 300
    assert m["duration_s"] == pytest.approx(183.567, abs=1e-3)
    assert m["request_throughput"] == pytest.approx(300 / m["duration_s"])
    assert "mean_itl_ms" not in m  # no per-token times in this format


def run_of(frame: pd.DataFrame, itl_s=None) -> MeasuredRun:
    return MeasuredRun(Path("x"), "x", frame, itl_s=itl_s)


def test_hand_computed_small_run():
    frame = pd.DataFrame(
        {
            "arrival_s": [0.0, 1.0, 2.0],
            "prompt_tokens": np.array([10, 20, 30], np.int64),
            "output_tokens": np.array([1, 3, 5], np.int64),
            "ttft_s": [0.1, 0.2, 0.4],
            "e2el_s": [0.1, 0.6, 2.4],
            "first_scheduled_s": [0.05, 1.1, 2.0],
        }
    )
    gaps = (np.array([]), np.array([0.1, 0.3]), np.array([0.5, 0.5, 0.5, 0.5]))
    m = measured_metrics(run_of(frame, gaps))
    # TPOT over outputs > 1 only: (0.6 - 0.2) / 2 = 0.2 s, (2.4 - 0.4) / 4 = 0.5 s
    assert m["mean_tpot_ms"] == pytest.approx(350.0)
    assert m["median_tpot_ms"] == pytest.approx(350.0)
    assert m["p90_tpot_ms"] == pytest.approx(200 + 0.9 * 300)
    assert m["mean_ttft_ms"] == pytest.approx(700 / 3)
    assert m["p99_e2el_ms"] == pytest.approx(np.percentile([100, 600, 2400], 99))
    assert m["duration_s"] == pytest.approx(4.4)  # last completion 2.0 + 2.4
    assert m["output_throughput"] == pytest.approx(9 / 4.4)
    assert m["total_token_throughput"] == pytest.approx(69 / 4.4)
    assert m["mean_itl_ms"] == pytest.approx(np.mean([100, 300, 500, 500, 500, 500]))
    assert m["mean_queue_ms"] == pytest.approx((50 + 100 + 0) / 3)


def test_no_tpot_when_every_request_made_one_token():
    frame = pd.DataFrame({"arrival_s": [0.0], "prompt_tokens": np.array([5], np.int64),
                          "output_tokens": np.array([1], np.int64), "ttft_s": [0.2],
                          "e2el_s": [0.2]})  # fmt: skip
    m = measured_metrics(run_of(frame))
    assert "mean_tpot_ms" not in m and m["mean_ttft_ms"] == pytest.approx(200.0)
