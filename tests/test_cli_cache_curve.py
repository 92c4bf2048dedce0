"""`simkv cache-curve`: the table and page of a trace or a config; one-line errors (exit 2)."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from simkv.cli import app

runner = CliRunner()


def _mooncake(path: Path) -> Path:
    """Six requests over three 512-token hash ids: two share a prefix of two ids."""
    rows = [
        (600, [0, 1]), (1100, [0, 1, 2]), (300, [3]), (1024, [0, 1]), (700, [4, 5]), (512, [3]),
    ]  # fmt: skip
    lines = [
        json.dumps({"timestamp": 10 * i, "input_length": n, "output_length": 5, "hash_ids": ids})
        for i, (n, ids) in enumerate(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


CONFIG = """\
name: shared
seed: 1
workload:
  kind: shared_prefix
  num_requests: 60
  arrival: {kind: poisson, rate: 10.0}
  num_prefixes: 3
  prefix_tokens: {kind: fixed, value: 64}
  suffix_tokens: {kind: fixed, value: 20}
  output_tokens: {kind: fixed, value: 4}
model: llama-2-7b
gpu: a100-80gb
kv_cache: {block_size: 8, num_blocks: 40, prefix_caching: hash}
scheduler: {kind: vllm_v1}
"""

CHAT = """\
workload:
  kind: multi_turn
  num_sessions: 10
  arrival: {kind: poisson, rate: 1.0}
  turns: {kind: fixed, value: 4}
  first_prompt_tokens: {kind: fixed, value: 40}
  new_tokens: {kind: fixed, value: 10}
  output_tokens: {kind: fixed, value: 30}
  think_s: {kind: fixed, value_s: 1.0}
"""


def test_trace_with_model_and_mark_writes_table_and_page(tmp_path):
    trace, out = _mooncake(tmp_path / "mc.jsonl"), tmp_path / "out"
    args = ["cache-curve", str(trace), "--model", "llama-3-8b", "--dtype", "fp8",
            "--mark", "cpu=1GiB", "--out", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "cpu (1,024 blocks)" in result.output  # 16 tokens x 64 KiB (fp8 KV) = 1 MiB a block
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["cache_curve.csv", "cache_curve.html", ".simkv-output"]
    )
    table = pd.read_csv(out / "cache_curve.csv")
    assert list(table.columns) == [
        "capacity_blocks", "capacity_gib", "hit_tokens", "hit_rate", "request_hit_rate"
    ]  # fmt: skip
    # hits with room for all: request 1 the 600 // 16 = 37 blocks request 0 filled (ids 0, 1);
    # request 3 its (1024 - 1) // 16 = 63 blocks from request 1; request 5 (id 3, 512 tokens)
    # the 300 // 16 = 18 blocks of request 2's shorter id 3 segment
    assert table["hit_tokens"].iloc[-1] == (37 + 63 + 18) * 16
    page = (out / "cache_curve.html").read_text()
    assert '<meta name="generator" content="simkv' in page and "<svg" in page
    assert "cpu" in page and "llama-3-8b" in page


def test_config_workload_marks_its_hbm_pool(tmp_path):
    cfg = tmp_path / "shared.yaml"
    cfg.write_text(CONFIG)
    result = runner.invoke(app, ["cache-curve", str(cfg), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "HBM pool (39 blocks)" in result.output  # 40 less vLLM V1's null block
    table = pd.read_csv(tmp_path / "o" / "cache_curve.csv")
    assert table["hit_rate"].iloc[-1] > 0.5


def test_config_tiers_are_marked_below_its_hbm_pool(tmp_path):
    # 40 blocks less the null block in HBM, then a CPU tier of 100 blocks and a disk of 1000:
    # each mark is the capacity of everything above it
    cfg = tmp_path / "tiers.yaml"
    tiers = ("tiers: [{kind: cpu, capacity_blocks: 100}, "
             "{kind: disk, capacity_blocks: 1000, medium: nvme_gen4}]")  # fmt: skip
    text = CONFIG.replace("prefix_caching: hash}", f"prefix_caching: hash, {tiers}}}")
    assert text != CONFIG
    cfg.write_text(text)
    result = runner.invoke(app, ["cache-curve", str(cfg), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "HBM pool (39 blocks)" in result.output
    assert "+ cpu tier (139 blocks)" in result.output
    assert "+ disk tier (1,139 blocks)" in result.output


def test_with_outputs_caches_answers_of_a_multi_turn_config(tmp_path):
    cfg = tmp_path / "chat.yaml"
    cfg.write_text(CONFIG.replace(CONFIG[CONFIG.index("workload:") : CONFIG.index("model:")], CHAT))
    rates = []
    for flag in ([], ["--with-outputs"]):
        out = tmp_path / f"o{len(flag)}"
        result = runner.invoke(app, ["cache-curve", str(cfg), "--out", str(out), *flag])
        assert result.exit_code == 0, result.output
        rates.append(pd.read_csv(out / "cache_curve.csv")["hit_rate"].iloc[-1])
    assert rates[1] > rates[0] > 0


def test_same_trace_gives_the_same_bytes(tmp_path):
    trace = _mooncake(tmp_path / "mc.jsonl")
    for out in ("a", "b"):
        args = ["cache-curve", str(trace), "--model", "llama-3-8b", "--out", str(tmp_path / out)]
        assert runner.invoke(app, args).exit_code == 0
    for name in ("cache_curve.csv", "cache_curve.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_default_output_folder_is_named_after_the_trace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _mooncake(tmp_path / "mc.jsonl")
    result = runner.invoke(app, ["cache-curve", "mc.jsonl"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "reports" / "mc-cache-curve" / "cache_curve.csv").exists()


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--block-size", "0"], "error: --block-size: must be 1 to 2,147,483,648 tokens, got 0"),
        (["--model", "no-such-model"], "error: --model: unknown model preset 'no-such-model'"),
        (["--model", "llama-3-8b", "--dtype", "int3"], "error: --dtype: "),
        (["--dtype", "fp8"], "error: --dtype: --dtype needs --model"),
        (["--mark", "cpu=lots"], "error: --mark: expected NAME=SIZE"),
        (["--mark", "cpu=8GiB"], "error: --mark: 'cpu=8GiB': a size in GiB needs --model"),
    ],
)
def test_bad_option_is_one_line_exit_2(tmp_path, option, expected):
    trace = _mooncake(tmp_path / "mc.jsonl")
    result = runner.invoke(app, ["cache-curve", str(trace), *option])
    assert result.exit_code == 2
    assert result.output.startswith(expected)
    assert result.output.count("\n") == 1


def test_config_with_model_options_is_refused(tmp_path):
    cfg = tmp_path / "shared.yaml"
    cfg.write_text(CONFIG)
    trace = _mooncake(tmp_path / "mc.jsonl")
    result = runner.invoke(app, ["cache-curve", str(trace), "--config", str(cfg), "--model", "x"])
    assert result.exit_code == 2
    assert result.output.startswith("error: --config: the model, dtype and block size come")
    result = runner.invoke(app, ["cache-curve", str(cfg), "--block-size", "4"])
    assert result.exit_code == 2
    assert result.output.startswith("error: --block-size: the model, dtype and block size come")


def test_trace_without_content_through_installed_entry_point(tmp_path):
    trace = tmp_path / "lengths.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,20,5\n")
    simkv = Path(sys.executable).parent / "simkv"
    proc = subprocess.run(
        [str(simkv), "cache-curve", str(trace), "--out", str(tmp_path / "o")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"error: {trace}: the trace has no prompt content")
    assert proc.stderr.count("\n") == 1
    assert not (tmp_path / "o").exists()
