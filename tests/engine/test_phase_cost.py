"""Per-phase measurements as a cost model: a DistServe profile and a Splitwise table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from simkv.config.cost import TableCostConfig
from simkv.config.hardware import load_gpu_preset, load_model_preset
from simkv.engine.costs import build_cost_model
from simkv.engine.phase_cost import PhaseCostModel
from simkv.engine.step_work import StepWork, chunk_attention_pairs
from simkv.errors import InputError

MEASURED = Path(__file__).parents[2] / "traces" / "measured"
DISTSERVE = MEASURED / "distserve" / "profiler-a100-80g.vllm.json"
SPLITWISE = MEASURED / "splitwise" / "perf_model_a100.csv"
A100 = load_gpu_preset("a100-80gb")
# facebook/opt-13b at tp 1 in the profile (ms)
PREFILL = (22.052204789310185, 0.14050923870128956, 8.076584822611088e-06)
SMALL = (23.475041008414784, 0.000592934466077393, 0.060726861260369455)
LARGE = (20.206356173691958, 0.0004907727036234946, 0.1200031385587413)


def model(path: Path, name: str, tp: int) -> PhaseCostModel:
    built = build_cost_model(TableCostConfig(path=path), load_model_preset(name), A100,
                             tensor_parallel=tp, block_size=16, base_dir=Path("/"))  # fmt: skip
    assert isinstance(built, PhaseCostModel)
    return built


def prompt(n: int) -> StepWork:
    return StepWork(n, 0, chunk_attention_pairs(n, 0), 0, 1)


def decodes(batch: int, context: int) -> StepWork:
    return StepWork(0, batch, 0, batch * (context + 1), batch)


def test_distserve_formulas() -> None:
    opt = model(DISTSERVE, "opt-13b", 1)
    a, b, c = PREFILL
    assert opt.step_time_s(prompt(512)) * 1e3 == pytest.approx(a + b * 512 + c * 512**2)
    a, b, c = SMALL  # 8 sequences: below the threshold of 95
    assert opt.step_time_s(decodes(8, 511)) * 1e3 == pytest.approx(a + b * 8 * 512 + c * 8)
    a, b, c = LARGE
    assert opt.step_time_s(decodes(128, 99)) * 1e3 == pytest.approx(a + b * 128 * 100 + c * 128)


def test_a_mixed_step_pays_one_fixed_cost() -> None:
    opt = model(DISTSERVE, "opt-13b", 1)
    mixed = StepWork(256, 8, chunk_attention_pairs(256, 0), 8 * 512, 9)
    fixed = min(PREFILL[0] + PREFILL[1] + PREFILL[2], SMALL[0] + SMALL[1] + SMALL[2])
    both = opt.step_time_s(prompt(256)) + opt.step_time_s(decodes(8, 511))
    assert opt.step_time_s(mixed) == pytest.approx(both - fixed * 1e-3)


def test_splitwise_rows_are_interpolated() -> None:
    llama = model(SPLITWISE, "llama-2-70b", 4)
    # the TP 4 prompt rows of 1,024 tokens (1 × 1024 and 2 × 512), each point's repeats
    # averaged, then the points averaged
    table = pd.read_csv(SPLITWISE)
    rows = table[(table.model == "llama2-70b") & (table.tensor_parallel == 4)
                 & (table.prompt_size * table.batch_size == 1024)]  # fmt: skip
    points = rows.groupby(["prompt_size", "batch_size", "token_size"]).prompt_time.mean()
    at_1024 = llama.step_time_s(prompt(1024)) * 1e3
    assert at_1024 == pytest.approx(points.mean(), rel=1e-9)
    assert 220 < at_1024 < 260
    one = llama.step_time_s(decodes(1, 512 + 64)) * 1e3  # prompt 512, 128 generated
    assert 40 < one < 50


def test_missing_tp_or_model_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"at tp 8 \(tp degrees: 1, 2, 4\)"):
        model(DISTSERVE, "opt-13b", 8)
    with pytest.raises(InputError, match=r"no data for model 'llama-3.1-8b' at tp 1"):
        model(SPLITWISE, "llama-3.1-8b", 1)


def test_a_run_config_names_the_profile(tmp_path: Path) -> None:
    from simkv.run import load_config, simulate

    config = tmp_path / "run.yaml"
    config.write_text(f"""\
name: distserve
workload: {{kind: synthetic, num_requests: 20, arrival: {{kind: poisson, rate: 4}},
           prompt_tokens: {{kind: fixed, value: 100}}, output_tokens: {{kind: fixed, value: 20}}}}
model: opt-13b
gpu: a100-80gb
scheduler: {{kind: vllm_v0}}
cost_model: {{kind: table, path: {DISTSERVE}}}
""")
    steps = simulate(load_config(config), tmp_path).frames.steps
    first = steps.iloc[0]  # one 100-token prompt
    a, b, c = PREFILL
    assert first.duration_s * 1e3 == pytest.approx(a + b * 100 + c * 100**2)
