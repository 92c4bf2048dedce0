"""Numbers beyond their documented range are refused at start-up with one located line:
trace timestamps, priority weights, synthetic workload sizes, CLI options, physical
quantities, and the memory a fleet would allocate."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.cli import SYNTHETIC, errors, one_error, succeeds

AZURE = """\
name: azure
workload: {kind: trace, path: az.csv, format: azure}
model: {preset: llama-2-7b, max_model_len: 64}
gpu: a100-80gb
kv_cache: {block_size: 4, num_blocks: 40}
"""


@pytest.mark.parametrize(
    ("stamps", "problem"),
    [
        (["2023-01-01 00:00:00", "9999-01-01T00:00:00Z"], "years 1678..2261"),
        (["2023-11-16 18:15:46.6805900", "9999-12-31 23:59:59.0"], "years 1678..2261"),
        (["1678-01-01 00:00:00", "2262-04-01 00:00:00"], "years 1678..2261"),
        (["1678-01-01 00:00:00", "2261-04-01 00:00:00"], "more than 1e+09 s after"),
    ],
)
def test_azure_timestamp_out_of_range_is_located(
    tmp_path: Path, stamps: list[str], problem: str
) -> None:
    rows = "".join(f"{stamp},10,5\n" for stamp in stamps)
    (tmp_path / "az.csv").write_text(f"TIMESTAMP,ContextTokens,GeneratedTokens\n{rows}")
    config = tmp_path / "az.yaml"
    config.write_text(AZURE)
    line = one_error(["run", str(config), "--out", str(tmp_path / "o")], "az.csv:3 TIMESTAMP")
    assert problem in line


def test_azure_timestamps_within_range_run(tmp_path: Path) -> None:
    rows = "2023-01-01 00:00:00+01:00,10,5\n2023-01-01 00:00:01Z,20,3\n"
    (tmp_path / "az.csv").write_text(f"TIMESTAMP,ContextTokens,GeneratedTokens\n{rows}")
    config = tmp_path / "az.yaml"
    config.write_text(AZURE)
    succeeds(["run", str(config), "--out", str(tmp_path / "o")])


def test_priority_weights_that_overflow_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "p.yaml"
    priority = "  priority: {values: [0, 1], weights: [1e308, 1e308]}\n"
    config.write_text(SYNTHETIC.replace("model:", priority + "model:", 1))
    lines = errors(["run", str(config), "--out", str(tmp_path / "o")])
    assert "p.yaml:8 workload.priority.weights.0: " in lines[0], lines
    assert lines[0].endswith("less than or equal to 1000000000000"), lines


def test_num_prefixes_beyond_the_request_limit_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "sp.yaml"
    config.write_text(
        SYNTHETIC.replace("kind: synthetic", "kind: shared_prefix")
        .replace("  duration_s: 10\n", "  num_requests: 10\n  num_prefixes: 1000000000\n")
        .replace("  prompt_tokens:", "  prefix_tokens: {kind: fixed, value: 10}\n  suffix_tokens:")
    )
    line = one_error(["run", str(config), "--out", str(tmp_path / "o")], "sp.yaml:5")
    assert "workload.num_prefixes" in line and "10000000" in line


def test_search_refuses_more_points_per_round_than_its_limit() -> None:
    from simkv.capacity.count import check_count_parameters
    from simkv.capacity.search import MAX_PER_ROUND, SearchError, check_parameters

    check_parameters(1.0, 2.0, 0.02, MAX_PER_ROUND)
    with pytest.raises(SearchError, match="per_round must be at most 64"):
        check_parameters(1.0, 2.0, 0.02, 10**9)
    with pytest.raises(SearchError, match="per_round must be at most 64"):
        check_count_parameters(1, 8, 10**9)


@pytest.mark.parametrize("value", ["65", "1000000000"])
def test_capacity_per_round_beyond_its_range_is_refused(tmp_path: Path, value: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(SYNTHETIC + "slo: {ttft_ms: 100000}\n")
    args = ["capacity", str(config), "--per-round", value, "--out", str(tmp_path / "o")]
    line = one_error(args, "--per-round: ")
    assert "at most 64" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        ("--max-evals", "0", "must lie in 1..10000, got 0"),
        ("--max-evals", "10001", "must lie in 1..10000, got 10001"),
        ("--max-error", "nan", "must lie in 0..100 (a fraction), got nan"),
        ("--max-error", "-0.5", "must lie in 0..100 (a fraction), got -0.5"),
        ("--max-error", "inf", "must lie in 0..100 (a fraction), got inf"),
    ],
)
def test_calibrate_numbers_beyond_their_range_are_refused(
    tmp_path: Path, option: str, value: str, problem: str
) -> None:
    args = ["calibrate", str(tmp_path / "missing.json"), option, value]
    assert one_error(args, f"{option}: ").endswith(problem)


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ("gpu.hbm_bandwidth_gbps=1e-300", "gpu.hbm_bandwidth_gbps"),
        ("gpu.peak_tflops=1e-300", "gpu.peak_tflops"),
        ("gpu.interconnect_gbps=1e300", "gpu.interconnect_gbps"),
        ("cost_model.gemm_efficiency=1e-300", "cost_model.gemm_efficiency"),
        ("cost_model.step_overhead_ms=1e300", "cost_model.step_overhead_ms"),
        ("cost_model.allreduce_latency_us=1e300", "cost_model.allreduce_latency_us"),
        ("cost_model.latency_clock_mhz=1e-300", "cost_model.latency_clock_mhz"),
        ("gpu.boost_clock_mhz=1e300", "gpu.boost_clock_mhz"),
        ("cost_model.small_block_attention_penalty=1e300", "small_block_attention_penalty"),
        ("model.num_layers=1000000000000", "model.num_layers"),
        ("model.intermediate_size=100000000000000000000000", "model.intermediate_size"),
        ("model.num_parameters=10000000000000000", "model.num_parameters"),
    ],
)
def test_physical_quantities_beyond_their_range_are_refused(
    tmp_path: Path, item: str, field: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(SYNTHETIC)
    one_error(["run", str(config), "--out", str(tmp_path / "o"), "--set", item], field)
    assert not (tmp_path / "o").exists()


def test_slowest_gpu_in_range_writes_a_finite_summary(tmp_path: Path) -> None:
    import json

    config = tmp_path / "c.yaml"
    config.write_text(SYNTHETIC)
    slow = [
        "gpu.hbm_bandwidth_gbps=0.001",
        "gpu.peak_tflops=0.001",
        "gpu.sustained_tflops=0.001",
        "cost_model.gemm_efficiency=0.001",
        "cost_model.weight_read_efficiency=0.001",
    ]
    succeeds(
        ["run", str(config), "--out", str(tmp_path / "o"), *(a for s in slow for a in ("--set", s))]
    )
    text = (tmp_path / "o" / "summary.json").read_text()
    assert "Infinity" not in text and "NaN" not in text
    json.loads(text, parse_constant=lambda name: pytest.fail(f"summary holds {name}"))


def test_summary_never_holds_a_number_json_cannot() -> None:
    from simkv.metrics.summary import finite_or_none

    summary = {"a": float("inf"), "b": float("nan"), "c": 1.5, "d": None, "e": 3}
    assert finite_or_none(summary) == {"a": None, "b": None, "c": 1.5, "d": None, "e": 3}


FLEET = """\
fleet:
  router: {kind: round_robin}
  replicas:
    - {count: 4096}
"""


@pytest.mark.parametrize("command", ["validate", "run"])
def test_fleet_too_large_for_memory_is_refused_at_start_up(tmp_path: Path, command: str) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text(SYNTHETIC.replace("block_size: 4, num_blocks: 40", "block_size: 1") + FLEET)
    args = [command, str(config)] + (["--out", str(tmp_path / "o")] if command == "run" else [])
    line = one_error(args, "fleet.yaml:13 fleet.replicas: ")
    assert "4096 × " in line and "more than 134,217,728" in line
    assert not (tmp_path / "o").exists()


def test_run_blocks_are_summed_over_replica_groups(tmp_path: Path, monkeypatch) -> None:
    import simkv.run.inputs

    monkeypatch.setattr(simkv.run.inputs, "MAX_RUN_BLOCKS", 139)
    config = tmp_path / "fleet.yaml"
    groups = "    - {count: 2}\n    - {count: 3, kv_cache: {block_size: 4, num_blocks: 20}}\n"
    config.write_text(SYNTHETIC + FLEET.replace("    - {count: 4096}\n", groups))
    line = one_error(["validate", str(config)], "fleet.replicas: ")
    assert "140 KV blocks (2 × 40 + 3 × 20 per replica), more than 139" in line
    monkeypatch.setattr(simkv.run.inputs, "MAX_RUN_BLOCKS", 140)
    succeeds(["validate", str(config)])


def test_single_engine_swap_pool_counts_toward_the_run_blocks(tmp_path: Path, monkeypatch) -> None:
    import simkv.run.inputs

    monkeypatch.setattr(simkv.run.inputs, "MAX_RUN_BLOCKS", 551)
    config = tmp_path / "swap.yaml"
    swap = (
        "kv_cache: {block_size: 4, num_blocks: 40, swap_space_gib: 1}\nscheduler: {kind: vllm_v0}\n"
    )
    config.write_text(SYNTHETIC.replace("kv_cache: {block_size: 4, num_blocks: 40}\n", swap))
    one_error(["validate", str(config)], "swap.yaml:10 kv_cache: the run would allocate")


@pytest.mark.parametrize("value", ["0", "100000"])
def test_jobs_beyond_their_range_are_refused(tmp_path: Path, value: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(SYNTHETIC)
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"name: s\nbase: {config}\ngrid:\n  seed: [1, 2]\n")
    args = ["sweep", str(sweep), "--executor", "process", "--jobs", value]
    line = one_error([*args, "--out", str(tmp_path / "o")], "--jobs: ")
    assert "must lie in 1..256" in line
    assert not (tmp_path / "o").exists()
