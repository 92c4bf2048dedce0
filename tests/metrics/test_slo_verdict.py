"""The SLO verdict in a run's summary: attainment, pass or fail at the judged percentile, the
binding objective; and the offered load (rate, burstiness), on hand-computed requests."""

from __future__ import annotations

import pytest

from simkv.config.sim import SLOConfig
from simkv.metrics.recorder import RunFrames
from simkv.metrics.slo import meets_slos
from simkv.metrics.summary import summarize
from tests.metrics.test_summary import _frames

# the three requests of _frames: TTFT 100, 200, 100 ms; TPOT 500, 500, 1000 ms


def _summary(slo: SLOConfig) -> dict[str, object]:
    frames = _frames()
    zero = ("blocks_used", "cached_blocks", "shared_slots", "token_slots", "reserved_slots",
            "internal_frag_slots", "external_frag_slots")  # fmt: skip
    steps = frames.steps.assign(**dict.fromkeys(zero, 0), free_slots=1)
    return summarize(RunFrames(frames.requests, steps, frames.itl), slo, 10)  # type: ignore[return-value]


def test_all_pass_at_the_median_and_the_least_headroom_binds() -> None:
    slo = SLOConfig(ttft_ms=150, tpot_ms=2000, percentile=50)
    summary = _summary(slo)
    assert summary["slo_percentile"] == 50
    assert summary["slo_ttft_pass"] is True and summary["slo_tpot_pass"] is True
    assert summary["slo_ttft_attainment_frac"] == pytest.approx(2 / 3)  # 200 ms misses 150
    assert summary["slo_tpot_attainment_frac"] == 1.0
    assert summary["slo_pass"] is True and meets_slos(summary, slo)
    assert summary["slo_binding"] == "ttft"  # 100 / 150 beats 500 / 2000
    assert summary["slo_binding_headroom_frac"] == pytest.approx(1 - 100 / 150)
    assert "slo_e2el_pass" not in summary


def test_the_worst_failure_binds_at_p99() -> None:
    slo = SLOConfig(ttft_ms=150, tpot_ms=600)
    summary = _summary(slo)
    # p99 TTFT = 198 ms (1.32 × 150); p99 TPOT = 990 ms (1.65 × 600): TPOT fails worse
    assert summary["slo_ttft_pass"] is False and summary["slo_tpot_pass"] is False
    assert summary["slo_tpot_attainment_frac"] == pytest.approx(2 / 3)
    assert summary["slo_pass"] is False and not meets_slos(summary, slo)
    assert summary["slo_binding"] == "tpot"
    assert summary["slo_binding_headroom_frac"] == pytest.approx(1 - 990 / 600)


def test_no_slo_no_verdict_keys() -> None:
    summary = _summary(SLOConfig())
    assert not [key for key in summary if key.startswith("slo_")]


def test_offered_rate_and_burstiness() -> None:
    summary = _summary(SLOConfig())
    # arrivals 0, 0.5, 2.5 s: gaps 0.5 and 2.0 s
    assert summary["offered_requests_per_s"] == pytest.approx(2 / 2.5)
    assert summary["arrival_cv"] == pytest.approx(0.75 / 1.25)
    assert summary["max_concurrent_requests"] == 2
