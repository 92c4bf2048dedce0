"""``simkv calibrate`` through the real entry point: step tables, a measured run, profiles."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from simkv.calibrate.steps import decode_work, prefill_work
from simkv.cli import app
from simkv.config.hardware import load_gpu_preset, load_model_preset
from simkv.config.profile import read_profile
from simkv.engine.cost_model import RooflineCostModel
from simkv.run import load_config, simulate
from tests.calibrate.test_fit import KNOBS, TRUE, synthetic_samples

RUNNER = CliRunner(env={"COLUMNS": "200"})  # tables and titles on one line each


def write_steps(path: Path) -> Path:
    rows = [{"step_time_ms": s.time_ms, "prefill_tokens": s.work.prefill_tokens,
             "decode_tokens": s.work.decode_tokens, "num_seqs": s.work.num_seqs,
             "kv_read_tokens": s.work.kv_read_tokens, "attention_pairs": s.work.attention_pairs}
            for s in synthetic_samples()]  # fmt: skip
    pd.DataFrame(rows).to_csv(path, index=False, float_format="%.17g")
    return path


def test_step_table_to_profile_to_run_config(tmp_path: Path) -> None:
    steps = write_steps(tmp_path / "steps.csv")
    profile = tmp_path / "profile.yaml"
    knobs = ",".join(KNOBS)  # TRUE's weight-read efficiency differs from the default
    args = ["calibrate", str(steps), "--model", "llama-3.1-8b", "--gpu", "NVIDIA A100-SXM4-80GB",
            "--fit", knobs]  # fmt: skip
    result = RUNNER.invoke(app, [*args, "--out", str(profile)])
    assert result.exit_code == 0, result.output
    assert "residuals by model" in result.output and f"wrote {profile}" in result.output
    # how to use it, and one plausibility line per fitted knob
    assert f"--set 'cost_model={{profile: {profile.resolve()}}}'" in result.output
    checks = [line.split()[:2] for line in result.output.splitlines()
              if line.startswith(("  ok ", "  check "))]  # fmt: skip
    assert [knob for _, knob in checks] == list(KNOBS)
    assert ["ok", "step_overhead_ms"] in checks
    fitted = read_profile(profile)
    assert fitted.step_overhead_ms == pytest.approx(TRUE.step_overhead_ms, rel=0.01)
    assert fitted.latency_clock_mhz == 1410.0  # the A100's: its latencies scale on other GPUs
    assert "# latency_clock_mhz 1410: the fitted GPU's clock" in profile.read_text()
    assert profile.read_text().startswith("# simkv calibration profile: step-level fit")
    # how far to trust it: held out, then the verdict last (TRUE's knobs are not all in range)
    assert "held out (alternate halves): " in result.output
    verdict = result.output.strip().splitlines()[-1]
    assert verdict.startswith("verdict: ")
    assert f"# {verdict}" in profile.read_text()
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "name": "calibrated",
        "workload": {"kind": "synthetic", "num_requests": 5,
                     "arrival": {"kind": "poisson", "rate": 1},
                     "prompt_tokens": {"kind": "fixed", "value": 8},
                     "output_tokens": {"kind": "fixed", "value": 4}},
        "model": "llama-3.1-8b", "gpu": "a100-80gb",
        "cost_model": {"profile": "profile.yaml", "seq_overhead_ms": 0.5},
    }))  # fmt: skip
    cfg = load_config(config)
    assert cfg.cost_model.gemm_efficiency == fitted.gemm_efficiency  # type: ignore[union-attr]
    assert cfg.cost_model.seq_overhead_ms == 0.5  # type: ignore[union-attr]


def test_request_level_fit_recovers_the_step_overhead(tmp_path: Path) -> None:
    """A 'measurement' made by simkv itself with a known overhead; the fit finds it again. The
    GPU and every other cost knob are explicit, so the scenario does not move with the presets'
    or the roofline's defaults."""
    gpu = {"preset": "a100-80gb", "sustained_tflops": 312.0}
    cost = {"kind": "roofline", "seq_overhead_ms": 0.045, "kv_read_efficiency": 0.75}
    measured_cfg = tmp_path / "truth.yaml"
    measured_cfg.write_text(yaml.safe_dump({
        "name": "truth",
        "workload": {"kind": "synthetic", "num_requests": 40,
                     "arrival": {"kind": "poisson", "rate": 20},
                     "prompt_tokens": {"kind": "uniform", "low": 20, "high": 200},
                     "output_tokens": {"kind": "uniform", "low": 5, "high": 60}},
        "model": {"preset": "llama-3.1-8b", "max_model_len": 512}, "gpu": gpu,
        "kv_cache": {"num_blocks": 65},  # 64 usable beside vLLM V1's null block
        "cost_model": {**cost, "step_overhead_ms": 6.0},
    }))  # fmt: skip
    req = simulate(load_config(measured_cfg), tmp_path).frames.requests.sort_values("req_id")
    arrival = req["arrival_s"] - req["arrival_s"].min()
    pd.DataFrame({"arrival_s": arrival, "prompt_tokens": req["prompt_tokens"],
                  "output_tokens": req["output_tokens"],
                  "ttft_s": req["first_token_s"] - req["arrival_s"],
                  "e2el_s": req["finish_s"] - req["arrival_s"]}).to_csv(
        tmp_path / "measured.csv", index=False, float_format="%.17g")  # fmt: skip
    replay = tmp_path / "replay.yaml"
    replay.write_text(yaml.safe_dump({
        "name": "replay", "workload": {"kind": "measured", "path": "measured.csv"},
        "model": {"preset": "llama-3.1-8b", "max_model_len": 512}, "gpu": gpu,
        "kv_cache": {"num_blocks": 65},  # 64 usable beside vLLM V1's null block
    }))  # fmt: skip
    profile = tmp_path / "fit.yaml"
    start = tmp_path / "start.yaml"
    start.write_text(yaml.safe_dump({**cost, "step_overhead_ms": 2.0}))
    result = RUNNER.invoke(app, ["calibrate", str(tmp_path / "measured.csv"), "--config",
                                 str(replay), "--fit", "step_overhead_ms", "--max-evals", "40",
                                 "--start", str(start), "--out", str(profile)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert read_profile(profile).step_overhead_ms == pytest.approx(6.0, rel=0.01)
    assert "→ 0.0%" in result.output
    assert "measured vs simulated with the fitted profile" in result.output  # per metric
    assert "TTFT P99" in result.output and "Latency Mean" in result.output
    assert "held out: none at request level" in result.output
    assert result.output.strip().splitlines()[-1] == (
        "verdict: transferable (every fitted knob within its range)")  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["calibrate", "absent.csv"], "absent.csv: no such file or folder"),
        (
            ["calibrate", "STEPS", "--model", "llama-3.1-8b", "--gpu", "a100-80gb", "--fit", "x"],
            "--fit: unknown knob 'x'",
        ),
        (
            ["calibrate", "STEPS", "--model", "llama-3.1-8b", "--gpu", "a100-80gb", "--tp", "8"],
            "no steps at tensor-parallel degrees [8]",
        ),
        (["calibrate", "STEPS", "--gpu", "a100-80gb"], "pass --model"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    steps = str(write_steps(tmp_path / "steps.csv"))
    result = RUNNER.invoke(app, [steps if a == "STEPS" else a for a in args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_fit_that_stays_poor_exits_1(tmp_path: Path) -> None:
    steps = write_steps(tmp_path / "steps.csv")
    result = RUNNER.invoke(app, ["calibrate", str(steps), "--model", "llama-3.1-8b", "--gpu",
                                 "a100-80gb", "--fit", "seq_overhead_ms", "--out",
                                 str(tmp_path / "p.yaml"), "--max-error", "0.01"])  # fmt: skip
    assert result.exit_code == 1
    assert "the data do not fit this model" in result.output


def test_small_batches_print_the_data_range_and_the_extrapolation(tmp_path: Path) -> None:
    """Decode steps of 1-9 sequences (and prefills of two prompts): the fit says what range it
    saw and that the per-sequence overhead is extrapolated, on screen and atop the profile."""
    model = RooflineCostModel(TRUE, load_model_preset("llama-3.1-8b"), load_gpu_preset("a100-80gb"),
                              tensor_parallel=1, block_size=16)  # fmt: skip
    works = [decode_work(b, c) for b in range(1, 10) for c in (63, 1023)]
    works += [prefill_work(2, n) for n in (128, 512)]
    pd.DataFrame([{"step_time_ms": model.step_time_s(w) * 1e3, "prefill_tokens": w.prefill_tokens,
                   "decode_tokens": w.decode_tokens, "num_seqs": w.num_seqs,
                   "kv_read_tokens": w.kv_read_tokens, "attention_pairs": w.attention_pairs}
                  for w in works]).to_csv(tmp_path / "steps.csv", index=False)  # fmt: skip
    profile = tmp_path / "profile.yaml"
    knobs = "step_overhead_ms,seq_overhead_ms"
    result = RUNNER.invoke(app, ["calibrate", str(tmp_path / "steps.csv"), "--model",
                                 "llama-3.1-8b", "--gpu", "a100-80gb", "--fit", knobs,
                                 "--out", str(profile)])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = ("data range: decode 18 steps, batch 1–9 sequences, context 64–1,024 tokens/seq; "
            "prefill 2 steps, batch 2 sequences, 256–1,024 tokens a step")  # fmt: skip
    lines = result.output.splitlines()
    assert data in lines
    warning = next(line for line in lines if line.startswith("extrapolation: "))
    assert warning.startswith("extrapolation: the largest batch seen is 9 sequences, so "
                              "seq_overhead_ms (")  # fmt: skip
    header = profile.read_text()
    assert f"# {data}\n" in header and f"# {warning}\n" in header
