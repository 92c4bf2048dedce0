"""Host costs by engine era (simkv.config.host_eras): named host terms, era defaults picked by
the scheduler or by name, explicit fields winning, and no host term moving with the GPU."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
import yaml
from typer.testing import CliRunner

from simkv.cli import app
from simkv.config.cost import RooflineCostConfig
from simkv.config.hardware import load_gpu_preset, load_model_preset
from simkv.config.host_eras import HOST_ERAS, HOST_FIELDS, HostEra, auto_era, with_host_era
from simkv.config.policy import VllmV0Config, VllmV1Config
from simkv.config.sim import SimConfig
from simkv.engine.cost_model import RooflineCostModel
from simkv.engine.step_work import StepWork
from simkv.run import load_config, simulate
from tests.engine.helpers import tiny_data

ROOT = Path(__file__).parents[2]
OPT = load_model_preset("opt-13b")
A100, H100 = load_gpu_preset("a100-80gb"), load_gpu_preset("h100-80gb")
MIXED = StepWork(prefill_tokens=512, decode_tokens=6, attention_pairs=512 * 513 // 2,
                 kv_read_tokens=6 * 300, num_seqs=8, queued_requests=5)  # fmt: skip
ALL_TERMS = {"output_token_overhead_ms": 0.03, "queued_request_overhead_ms": 0.2}


def test_the_v1_era_is_the_field_defaults() -> None:
    """A config without an era prices the host as it always did: the vllm-v1 era."""
    fields = RooflineCostConfig.model_fields
    assert {name: fields[name].default for name in HOST_FIELDS} == HOST_ERAS["vllm-v1"].values()
    assert set(get_args(HostEra)) == {"auto", *HOST_ERAS}
    assert all("ms" in era.source for era in HOST_ERAS.values())  # each cites its numbers


@pytest.mark.parametrize("era", sorted(HOST_ERAS))
@pytest.mark.parametrize("tp", [1, 4])
def test_swapping_the_gpu_changes_no_host_term(era: str, tp: int) -> None:
    cfg = RooflineCostConfig(host_era=era, **ALL_TERMS)  # type: ignore[arg-type]
    on_a100 = RooflineCostModel(cfg, OPT, A100, tensor_parallel=tp, block_size=16)
    on_h100 = RooflineCostModel(cfg, OPT, H100, tensor_parallel=tp, block_size=16)
    assert on_a100.host_s(MIXED) == on_h100.host_s(MIXED)
    gpu_a100 = on_a100.step_time_s(MIXED) - on_a100.host_s(MIXED)
    gpu_h100 = on_h100.step_time_s(MIXED) - on_h100.host_s(MIXED)
    assert gpu_h100 < gpu_a100  # the GPU terms did move


def test_every_host_term_on_a_hand_computed_step() -> None:
    """8 sequences (2 prefilling, 6 decoding), 5 queued, tp 2 on the 2023-24 era:
    8.0 + 1 · 2.0 + 8 · 0.020 + 2 · 1.47 + 6 · 0.03 + 5 · 0.2 ms."""
    cfg = RooflineCostConfig(host_era="vllm-0.2-0.4", **ALL_TERMS)
    model = RooflineCostModel(cfg, OPT, A100, tensor_parallel=2, block_size=16)
    host_ms = 8.0 + 2.0 + 8 * 0.020 + 2 * 1.47 + 6 * 0.03 + 5 * 0.2
    assert model.host_s(MIXED) == pytest.approx(host_ms * 1e-3, rel=1e-12)


def test_zero_terms_add_nothing() -> None:
    cfg = RooflineCostConfig()
    model = RooflineCostModel(cfg, OPT, A100, tensor_parallel=1, block_size=16)
    quiet = StepWork(512, 6, 512 * 513 // 2, 6 * 300, 8)
    assert model.step_time_s(MIXED) == model.step_time_s(quiet)


def test_an_explicit_era_fills_only_what_the_config_leaves_out() -> None:
    cfg = RooflineCostConfig(host_era="vllm-0.6", seq_overhead_ms=0.01)
    assert (cfg.step_overhead_ms, cfg.seq_overhead_ms) == (3.8, 0.01)
    again = with_host_era(RooflineCostConfig(step_overhead_ms=1.0), "vllm-0.2-0.4")
    assert (again.host_era, again.step_overhead_ms, again.worker_overhead_ms) == (
        "vllm-0.2-0.4", 1.0, 2.0
    )  # fmt: skip
    assert with_host_era(again, "vllm-v1") is again  # every host field set: nothing to fill
    assert (
        with_host_era(again.model_copy(update={"host_era": "auto"}), "vllm-v1").host_era == "auto"
    )


def test_auto_follows_the_scheduler() -> None:
    assert auto_era(VllmV1Config(kind="vllm_v1", vllm_version="0.32")) == "vllm-v1"
    assert auto_era(VllmV0Config(kind="vllm_v0")) == "vllm-v1"  # no version: as before
    assert auto_era(VllmV0Config(kind="vllm_v0", vllm_version="0.4")) == "vllm-0.2-0.4"
    assert auto_era(VllmV0Config(kind="vllm_v0", vllm_version="0.6")) == "vllm-0.6"
    unquoted = yaml.safe_load("{kind: vllm_v0, vllm_version: 0.4}")
    assert auto_era(VllmV0Config.model_validate(unquoted)) == "vllm-0.2-0.4"


def test_a_run_config_resolves_its_era_and_states_it() -> None:
    v0 = ROOT / "configs" / "paper" / "sharegpt_vllm_v0.yaml"
    as_before = load_config(v0).cost_model
    assert isinstance(as_before, RooflineCostConfig)
    assert as_before.host_era == "vllm-v1"
    assert as_before.step_overhead_ms == 0.52
    old = load_config(v0, ['scheduler.vllm_version="0.4"']).cost_model
    assert (old.host_era, old.step_overhead_ms, old.worker_overhead_ms) == (
        "vllm-0.2-0.4",
        8.0,
        2.0,
    )
    mine = load_config(v0, ['scheduler.vllm_version="0.4"', "cost_model.step_overhead_ms=3"])
    assert (mine.cost_model.step_overhead_ms, mine.cost_model.seq_overhead_ms) == (3.0, 0.020)
    named = load_config(v0, ["cost_model.host_era=vllm-0.6", 'scheduler.vllm_version="0.4"'])
    assert (named.cost_model.host_era, named.cost_model.step_overhead_ms) == ("vllm-0.6", 3.8)


def test_each_fleet_group_resolves_its_own_schedulers_era(tmp_path: Path) -> None:
    data = tiny_data(tmp_path, [(0.0, 4, 3)], {"kind": "vllm_v1"}, num_blocks=40,
                     cost_model={"kind": "roofline"})  # fmt: skip
    v0 = {"kind": "vllm_v0", "vllm_version": "0.4", "max_num_batched_tokens": 16, "max_num_seqs": 8}
    data["fleet"] = {"replicas": [{"count": 1}, {"count": 1, "scheduler": v0}]}
    cfg = SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))
    eras = [group.cost_model.host_era for group in cfg.group_configs()]  # type: ignore[union-attr]
    assert eras == ["vllm-v1", "vllm-0.2-0.4"]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_the_engine_passes_the_waiting_queue_to_the_cost_model(
    tmp_path: Path, fast_forward: bool
) -> None:
    """Three requests at once, one running at a time (3 steps each): the queue holds 2 while
    the first runs, 1 while the second does, 0 then; 1 ms each is added to those steps."""
    sched = {"kind": "vllm_v1", "max_num_seqs": 1}
    durations = []
    for queued_ms in (0.0, 1.0):
        cost = {"kind": "roofline", "queued_request_overhead_ms": queued_ms}
        data = tiny_data(tmp_path, [(0.0, 4, 3)] * 3, sched, num_blocks=40, cost_model=cost)
        cfg = SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))
        out = simulate(cfg, tmp_path, fast_forward=fast_forward, check_invariants=True)
        durations.append(out.steps["duration_s"].to_numpy())
    added = (durations[1] - durations[0]) * 1e3
    assert added.tolist() == pytest.approx([2, 2, 2, 1, 1, 1, 0, 0, 0], abs=1e-9)


def test_an_unknown_era_is_one_located_line(tmp_path: Path) -> None:
    data = tiny_data(tmp_path, [(0.0, 4, 3)], {"kind": "vllm_v1"}, num_blocks=40,
                     cost_model={"kind": "roofline", "host_era": "vllm-0.5"})  # fmt: skip
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    line_no = config.read_text().splitlines().index("  host_era: vllm-0.5") + 1
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert f"{config}:{line_no}" in lines[0] and "cost_model.host_era" in lines[0], lines[0]
    assert not (tmp_path / "o").exists()
