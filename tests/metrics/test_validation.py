"""Simulated vs measured metrics: Diff% arithmetic, one metric set for both sides, replay check."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simkv.errors import InputError
from simkv.metrics.validation import (
    HEADLINE_KEYS,
    MetricRow,
    check_same_workload,
    compare_metrics,
    diff_pct,
    mean_abs_diff_pct,
    simulated_request_frame,
    validation_metrics,
)


def frame(**columns: list[float]) -> pd.DataFrame:
    """A request frame: arrival_s, prompt/output tokens, ttft_s, e2el_s (s)."""
    defaults = {"arrival_s": [0.0, 1.0, 2.0, 3.0], "prompt_tokens": [10, 20, 30, 40],
                "output_tokens": [5, 1, 3, 11], "ttft_s": [0.1, 0.2, 0.4, 0.8],
                "e2el_s": [0.5, 0.2, 1.0, 2.8]}  # fmt: skip
    return pd.DataFrame({**defaults, **columns})


def test_diff_pct_by_hand() -> None:
    assert diff_pct(110.0, 100.0) == pytest.approx(10.0)
    assert diff_pct(75.0, 100.0) == pytest.approx(-25.0)
    assert diff_pct(3.0, 3.0) == 0.0
    assert diff_pct(5.0, 0.0) is None  # no relative error against a zero measurement
    assert diff_pct(None, 100.0) is None
    assert diff_pct(100.0, None) is None
    assert diff_pct(float("nan"), 100.0) is None


def test_mean_abs_diff_is_over_the_twelve_headline_values() -> None:
    assert len(HEADLINE_KEYS) == 12
    assert {k.split("_")[1] for k in HEADLINE_KEYS} == {"ttft", "tpot", "e2el"}
    # diffs of +10, -20, +10, -20 … over the headline keys: mean |diff| 15
    rows = [MetricRow(k, k, 100.0, 110.0 if i % 2 == 0 else 80.0)
            for i, k in enumerate(HEADLINE_KEYS)]  # fmt: skip
    # rows outside the headline (p95, throughput) do not count however far off they are
    rows += [MetricRow("p95_ttft_ms", "x", 1.0, 50.0), MetricRow("request_throughput", "x", 1, 9)]
    assert mean_abs_diff_pct(tuple(rows)) == (pytest.approx(15.0), 12)
    rows[0] = MetricRow(HEADLINE_KEYS[0], "x", 0.0, 5.0)  # real 0: no Diff%, left out
    value, count = mean_abs_diff_pct(tuple(rows))
    assert count == 11
    assert value == pytest.approx((5 * 10 + 6 * 20) / 11)


def test_metrics_match_numpy() -> None:
    req = frame()
    out = validation_metrics(req)
    ttft_ms = np.array([100.0, 200.0, 400.0, 800.0])
    tpot_ms = np.array([400.0 / 4, 600.0 / 2, 2000.0 / 10])  # request 1 generated one token
    e2el_ms = np.array([500.0, 200.0, 1000.0, 2800.0])
    for name, values in (("ttft", ttft_ms), ("tpot", tpot_ms), ("e2el", e2el_ms)):
        assert out[f"mean_{name}_ms"] == pytest.approx(values.mean())
        for stat, q in (("median", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
            assert out[f"{stat}_{name}_ms"] == pytest.approx(np.percentile(values, q)), stat
    duration = 3.0 + 2.8  # first arrival → last completion
    assert out["request_throughput"] == pytest.approx(4 / duration)
    assert out["output_throughput"] == pytest.approx(20 / duration)
    assert out["completed"] == 4
    assert "mean_itl_ms" not in out


def test_itl_is_weighted_and_incomplete_requests_are_left_out() -> None:
    req = frame(e2el_s=[0.5, 0.2, np.nan, 2.8], ttft_s=[0.1, 0.2, np.nan, 0.8])
    gaps, counts = np.array([0.01, 0.03, 0.02]), np.array([3, 1, 2])
    out = validation_metrics(req, (gaps, counts))
    repeated = np.repeat(gaps * 1e3, counts)
    assert out["mean_itl_ms"] == pytest.approx(repeated.mean())
    assert out["p90_itl_ms"] == pytest.approx(np.percentile(repeated, 90))
    assert out["completed"] == 3
    assert out["mean_ttft_ms"] == pytest.approx(np.mean([100.0, 200.0, 800.0]))
    assert out["output_throughput"] == pytest.approx(17 / 5.8)


def test_simulated_frame_sorts_by_request_and_blanks_unfinished() -> None:
    requests = pd.DataFrame(
        {"req_id": [1, 0, 2], "arrival_s": [0.5, 0.0, 0.7], "prompt_tokens": [8, 4, 9],
         "output_tokens": [3, 2, 5], "generated_tokens": [3, 2, 0], "num_seqs": [1, 1, 1],
         "first_token_s": [0.6, 0.1, np.nan], "finish_s": [0.9, 0.3, np.nan],
         "status": ["finished", "finished", "rejected"]}
    )  # fmt: skip
    sim = simulated_request_frame(requests)
    assert sim["prompt_tokens"].tolist() == [4, 8, 9]
    assert sim["ttft_s"].to_numpy()[:2] == pytest.approx([0.1, 0.1])
    assert sim["e2el_s"].to_numpy()[:2] == pytest.approx([0.3, 0.4])
    assert np.isnan(sim["e2el_s"].iloc[2])
    with pytest.raises(InputError, match="multi-sequence"):
        simulated_request_frame(requests.assign(num_seqs=[1, 2, 1]))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.iloc[:3], "simulated run has 3 requests, the measured run 4"),
        (lambda f: f.assign(prompt_tokens=[10, 20, 31, 40]), "request 2 .* prompt_tokens 31"),
        (lambda f: f.assign(output_tokens=[5, 2, 3, 11]), "request 1 .* output_tokens 2"),
        (lambda f: f.assign(arrival_s=[0.0, 1.0, 2.5, 3.0]), "request 2 .* arrival_s 2.5"),
    ],
)
def test_workload_mismatch_names_it(change, message: str) -> None:
    real = frame()
    check_same_workload(real, frame(ttft_s=[9.0, 9.0, 9.0, 9.0], e2el_s=[9.0] * 4))  # same work
    with pytest.raises(InputError, match=f"workload mismatch: .*{message}"):
        compare_metrics(real, change(frame()))


def test_compare_rows_in_validation_layout() -> None:
    real = frame()
    sim = frame(ttft_s=[0.11, 0.22, 0.44, 0.88], e2el_s=[0.55, 0.22, 1.1, 3.08])  # all +10%
    itl = (np.array([0.01, 0.02]), np.array([1, 1]))
    validation = compare_metrics(real, sim, simulated_itl=itl)
    labels = [row.label for row in validation.rows]
    assert labels[:6] == ["TTFT Mean", "TTFT Median", "TTFT P90", "TTFT P95", "TTFT P99",
                          "TPOT Mean"]  # fmt: skip
    assert labels[-3:] == ["Request throughput (req/s)", "Output throughput (tok/s)",
                           "Requests completed"]  # fmt: skip
    assert not any(label.startswith("ITL") for label in labels)
    assert validation.notes == ("ITL left out: no per-token times in the measured run",)
    assert validation.mean_abs_diff_pct == pytest.approx(10.0)
    assert validation.headline_count == 12
    assert compare_metrics(real, sim).notes == ("ITL left out: neither run has per-token times",)
    both = compare_metrics(real, sim, measured_itl=itl, simulated_itl=itl)
    assert [r.diff_pct for r in both.rows if r.key.endswith("_itl_ms")] == [0.0] * 5
    assert both.notes == ()
