"""Numbers beyond their documented range are refused at start-up with one located line:
trace timestamps, priority weights, synthetic workload sizes, CLI options, physical
quantities, and the memory a fleet would allocate."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.cli import errors, one_error, succeeds

AZURE = """\
name: azure
workload: {kind: trace, path: az.csv, format: azure}
model: {preset: llama-2-7b, max_model_len: 64}
gpu: a100-80gb
kv_cache: {block_size: 4, num_blocks: 40}
"""
SYNTHETIC = """\
name: synthetic
workload:
  kind: synthetic
  duration_s: 10
  arrival: {kind: poisson, rate: 5}
  prompt_tokens: {kind: fixed, value: 10}
  output_tokens: {kind: fixed, value: 5}
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
