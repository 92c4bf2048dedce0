"""``simkv.calibrate.api``: a step fit on one GPU records that GPU's clock in the fitted config."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from simkv.calibrate.api import calibrate, clocked
from simkv.calibrate.fit import fit_steps
from simkv.config.cost import RooflineCostConfig
from tests.calibrate.test_cli_calibrate import write_steps
from tests.calibrate.test_fit import synthetic_samples

SAMPLES = synthetic_samples()  # every step on an a100-80gb (boost clock 1410 MHz)


def test_samples_of_one_gpu_give_its_clock() -> None:
    assert clocked(RooflineCostConfig(), SAMPLES).latency_clock_mhz == 1410.0
    on_h100 = [replace(s, gpu="h100-80gb") for s in SAMPLES]
    assert clocked(RooflineCostConfig(), on_h100).latency_clock_mhz == 1980.0


@pytest.mark.parametrize(
    ("gpus", "start_clock"),
    [(("a100-80gb", "h100-80gb"), None), (("rtx-4090",), None), (("a100-80gb",), 1755.0)],
)
def test_no_clock_is_recorded_for_several_gpus_an_unknown_clock_or_a_given_one(
    gpus: tuple[str, ...], start_clock: float | None
) -> None:
    samples = [replace(s, gpu=gpus[i % len(gpus)]) for i, s in enumerate(SAMPLES)]
    start = RooflineCostConfig(latency_clock_mhz=start_clock)
    assert clocked(start, samples) is start


def test_calibrate_records_the_clock_and_fits_as_without_it(tmp_path: Path) -> None:
    """On the GPU it was fitted on the clock factor is 1: the knobs come out as an unclocked
    fit's, and the config now says which clock its latencies belong to."""
    steps = write_steps(tmp_path / "steps.csv")
    knobs = ("step_overhead_ms", "gemm_efficiency")
    cal = calibrate([steps], model="llama-3.1-8b", gpu="a100-80gb", knobs=knobs)
    assert cal.result.config.latency_clock_mhz == 1410.0
    assert cal.result.start.latency_clock_mhz == 1410.0
    plain = fit_steps(RooflineCostConfig(), list(cal.samples), knobs).config
    assert plain.latency_clock_mhz is None
    for knob in knobs:
        assert getattr(cal.result.config, knob) == getattr(plain, knob)
