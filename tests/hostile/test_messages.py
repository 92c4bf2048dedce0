"""Error messages name the right place and the right fix: an options file's item, a measured
file named with a space, the knob that decides a stall."""

from __future__ import annotations

from pathlib import Path

from simkv.cli import app
from tests.hostile.cli import SYNTHETIC, errors, runner

CONFIG = SYNTHETIC + "slo: {ttft_ms: 100000}\n"
OPTIONS = """\
options:
  - name: a100
    price_per_gpu_hour: 2
    set: [gpu=a100-80gb]
  - name: bad
    price_per_gpu_hour: 3
    set:
      - gpu=a100-80gb
      - gpu.hbm_bandwidth_gbps=-1
      - nokey
      - kv_cache.blocksize=3
"""


def test_options_file_items_are_blamed_on_the_options_file(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(CONFIG)
    (tmp_path / "o.yaml").write_text(OPTIONS)
    args = ["capacity", str(tmp_path / "c.yaml"), "--at-rate", "5", "--count-max", "4",
            "--options", str(tmp_path / "o.yaml"), "--out", str(tmp_path / "out")]  # fmt: skip
    lines = errors(args)
    where = str(tmp_path / "o.yaml")
    assert lines == [
        f"{where}:9 gpu.hbm_bandwidth_gbps: option bad: Input should be greater than or equal "
        "to 0.001",
        f"{where}:10: option bad: expected key.path=value, got 'nokey'",
        f"{where}:11 kv_cache.blocksize: option bad: unknown key (did you mean block_size?)",
    ]
    assert not (tmp_path / "out").exists()


def test_a_bad_set_item_is_still_blamed_on_set_with_an_options_file(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(CONFIG)
    (tmp_path / "o.yaml").write_text(OPTIONS)
    args = ["capacity", str(tmp_path / "c.yaml"), "--at-rate", "5", "--options",
            str(tmp_path / "o.yaml"), "--set", "kv_cache.blocksize=3"]  # fmt: skip
    assert errors(args) == ["--set kv_cache.blocksize: unknown key (did you mean block_size?)"]


def test_calibrate_accepts_a_measured_file_named_with_a_space(tmp_path: Path) -> None:
    measured = tmp_path / "my run.csv"
    measured.write_text(
        "arrival_s,prompt_tokens,output_tokens,ttft_s,e2el_s\n"
        "0,100,20,0.05,0.5\n0.1,200,30,0.06,0.7\n0.2,50,10,0.04,0.3\n"
    )
    out = tmp_path / "p.yaml"
    args = ["calibrate", str(measured), "--model", "llama-2-7b", "--gpu", "a100-80gb",
            "--max-evals", "3", "--max-error", "100", "--out", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert out.is_file()


def test_any_label_becomes_a_folder_name() -> None:
    from simkv.config.limits import MAX_NAME_CHARS, as_folder_name

    assert as_folder_name("calibrate-my run") == "calibrate-my_run"
    assert as_folder_name(".hidden/x:y") == "_hidden_x_y"
    assert as_folder_name("") == "_"
    assert len(as_folder_name("é" * 500)) == MAX_NAME_CHARS


WATERMARK = """\
name: wm
workload: {kind: trace, path: wm.csv, format: generic, columns: {arrival_s: arrival_s}}
model: {preset: llama-2-7b, max_model_len: 160}
gpu: a100-80gb
kv_cache: {block_size: 4, num_blocks: 40, swap_space_gib: 1}
scheduler: {kind: vllm_v0, watermark: WM}
preemption: {mode: swap}
"""


def _watermark_run(tmp_path: Path, watermark: str):
    # A (old) stays small; B (newest) grows to 33+ of the 40 blocks, is swapped out when the
    # pool fills, and after A finishes needs more than 40 - 8 blocks to come back
    (tmp_path / "wm.csv").write_text(
        "arrival_s,prompt_tokens,output_tokens\n0,4,24\n0.001,100,60\n"
    )
    config = tmp_path / "wm.yaml"
    config.write_text(WATERMARK.replace("WM", watermark))
    return runner.invoke(app, ["run", str(config), "--out", str(tmp_path / watermark)])


def test_a_stall_the_watermark_decides_names_the_watermark(tmp_path: Path) -> None:
    result = _watermark_run(tmp_path, "0.2")
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert "stalled at t=" in lines[0] and "0 running, 1 swapped" in lines[0]
    assert "8 blocks scheduler.watermark (0.2) keeps free: lower scheduler.watermark" in lines[0]
    assert "max_num_batched_tokens" not in lines[0]


def test_the_same_run_with_a_lower_watermark_ends(tmp_path: Path) -> None:
    result = _watermark_run(tmp_path, "0.01")
    assert result.exit_code == 0, result.output
