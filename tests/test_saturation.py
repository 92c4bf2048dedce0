"""benchmarks/saturation.py: the knee rule on hand-made sweeps, the targets' verdicts, the
waiting-queue count of the real steps, and the script's quick run and doc block."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from simkv.config.cost import RooflineCostConfig
from tests.conftest import ROOT, load_benchmark

sat = load_benchmark("saturation")
steps = load_benchmark("saturation_steps")


def _sweep(rates, real_mean, sim_mean, real_p90, sim_p90):  # type: ignore[no-untyped-def]
    return [
        sat.Point(f"run-{r}", r, {"mean_ttft_ms": rm, "p90_ttft_ms": rp},
                  {"sim": {"mean_ttft_ms": sm, "p90_ttft_ms": sp}})
        for r, rm, sm, rp, sp in zip(rates, real_mean, sim_mean, real_p90, sim_p90, strict=True)
    ]  # fmt: skip


def test_the_knee_interpolates_between_the_rates_either_side_of_the_threshold() -> None:
    # mean TTFT crosses 1 s between 2 (400 ms) and 3 req/s (1,600 ms): 2 + 600/1200 = 2.5;
    # simulated between 3 (800) and 4 (1,200): 3.5. p90 crosses 2 s first between 1 (1,000)
    # and 2 (3,000) = 1.5, though it falls back below at 3 (a noisy run): the first crossing.
    points = _sweep([3, 1, 4, 2], [1600, 100, 5000, 400], [800, 100, 1200, 200],
                    [1900, 1000, 9000, 3000], [1000, 500, 1500, 900])  # fmt: skip
    real, sim = sat.knees(sorted(points, key=lambda p: p.rate), "mean_ttft_ms")
    assert real == pytest.approx(2.5) and sim == {"sim": pytest.approx(3.5)}
    real, sim = sat.knees(points, "p90_ttft_ms")
    assert real == pytest.approx(1.5) and sim == {"sim": None}  # never crosses in the sweep
    assert sat.diff_pct(3.5, 2.5) == pytest.approx(40.0)


def test_the_knee_target_is_plus_minus_seven_percent_and_says_why_it_cannot_be_read() -> None:
    assert sat.knee_verdict(2.5, 2.5 * 1.069) == "met"
    assert sat.knee_verdict(2.5, 2.5 * 0.931) == "met"
    assert sat.knee_verdict(2.5, 2.5 * 1.071) == "missed"
    assert sat.knee_verdict(2.5, None) == "missed (sim: none in the sweep)"
    assert sat.knee_verdict(None, None) == "no real knee in the sweep"
    assert sat.knee_verdict(None, 3.0).endswith("missed")


def test_the_ttft_target_counts_only_the_rates_up_to_the_real_knee() -> None:
    # real knee 2.5: rates 1 and 2 count (errors +10 %, -20 %); rate 3's +300 % does not
    points = _sweep([1, 2, 3], [100, 400, 1600], [110, 320, 6400], [1, 1, 1], [1, 1, 1])
    assert sat.worst_ttft_error(points, "sim", 2.5) == pytest.approx(20.0)
    assert sat.worst_ttft_error(points, "sim", None) == pytest.approx(300.0)


def test_a_step_counts_the_requests_it_left_waiting_not_those_it_admitted() -> None:
    began, ended = np.array([0.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])
    # request a: queued at 0, admitted by step 0 (scheduled during it): never counted;
    # b: queued at 0.5, scheduled at 2.5 (in step 2): left waiting by step 1 only (queued
    # after step 0 began); c: queued at 0, scheduled at 2.2: left waiting by steps 0 and 1.
    queued, scheduled = np.array([0.0, 0.5, 0.0]), np.array([0.1, 2.5, 2.2])
    assert steps.waiting_counts(began, ended, queued, scheduled).tolist() == [1, 2, 0]
    with pytest.raises(ValueError):
        steps.waiting_counts(began, ended, np.array([1.0]), np.array([0.5]))


def test_the_quick_run_prints_the_tiny_sweep_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    before = (ROOT / "docs" / "fidelity.md").read_text()
    monkeypatch.setattr(sys, "argv", ["saturation.py", "--quick"])
    sat.main()
    out = capsys.readouterr().out
    assert "| tiny-llama r0 | defaults | beyond / beyond |" in out
    assert "small-llama r" not in out
    assert " s wall, " in out and " s CPU" in out
    assert (ROOT / "docs" / "fidelity.md").read_text() == before


def test_quick_cannot_write_the_docs_and_help_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(sys, "argv", ["saturation.py", "--quick", "--write-docs"])
    with pytest.raises(SystemExit) as exc:
        sat.main()
    assert exc.value.code == 2
    monkeypatch.setattr(sys, "argv", ["saturation.py", "--help"])
    with pytest.raises(SystemExit) as exc:
        sat.main()
    assert exc.value.code == 0 and "--quick" in capsys.readouterr().out


def test_the_full_batch_fit_takes_the_first_rate_whose_steps_filled_the_batch() -> None:
    # largest batches of the bundled Zen 4 repeat 2 (steps.csv): 6, 7, 9, 11, 16, 20 up to
    # 3.5 req/s, then 32 (max_num_seqs) at 4 req/s; on the Zen 3, repeat 0 first fills it at 1.5
    runs = ROOT / "traces" / "measured" / "cpu-vllm0.32"
    assert load_benchmark("cpu_live").largest_batch(runs / "small-llama-chat-r3.5-2") == 20
    assert sat.full_batch_run(runs, runs / "small-llama-chat-r2-2").name == "small-llama-chat-r4-2"
    assert (
        sat.full_batch_run(runs, runs / "small-llama-chat-r2-0").name == "small-llama-chat-r1.5-0"
    )


def test_the_batch_table_bins_decode_steps_and_prices_them_per_profile() -> None:
    run = ROOT / "traces" / "measured" / "cpu-vllm0.32" / "small-llama-chat-r2-2"
    cheap, dear = RooflineCostConfig(), RooflineCostConfig(step_overhead_ms=100.0)
    text, top = steps.batch_table([run], {"cheap": cheap, "dear": dear})
    lines = text.splitlines()
    # r2-2 batches 1-9 sequences: three bins; the largest bin priced higher by the dearer one
    assert [line.split("|")[1].strip() for line in lines[2:]] == ["1-4", "5-8", "9-16"]
    assert set(top) == {"cheap", "dear"} and top["dear"] > top["cheap"]


def test_the_saturation_block_is_in_the_docs_and_kept_by_fidelity() -> None:
    doc_blocks = load_benchmark("doc_blocks")
    assert doc_blocks.SATURATION in doc_blocks.KEPT
    block = doc_blocks.block_of((ROOT / "docs" / "fidelity.md").read_text(), "saturation")
    assert block is not None and "## Saturation: the knee" in block
