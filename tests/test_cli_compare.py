"""`simkv compare RUN_DIR --measured PATH` end to end: a generic-CSV measurement, its replay
through `simkv run`, the printed table, the files written, and one-line errors (exit 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from simkv.cli import app
from simkv.report import run_report
from simkv.run import load_config, simulate, write_run

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
MEASURED = """\
arrival_s,prompt_tokens,output_tokens,ttft_s,e2el_s
0.0,10,5,0.05,0.2
0.01,20,3,0.06,0.15
0.02,7,9,0.08,0.4
0.5,12,1,0.03,0.03
"""
CONFIG = """\
name: tiny-replay
workload: {kind: measured, path: measured.csv}
model: {preset: llama-2-7b, max_model_len: 64}
gpu: a100-80gb
kv_cache: {block_size: 4, num_blocks: 40}
scheduler: {kind: vllm_v1}
"""
LABELS = [f"{lat} {stat}" for lat in ("TTFT", "TPOT", "Latency")
          for stat in ("Mean", "Median", "P90", "P95", "P99")]  # fmt: skip
LABELS += ["Request throughput (req/s)", "Output throughput (tok/s)", "Requests completed"]


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run folder, measured CSV): the tiny measurement replayed by `simkv run`."""
    root = tmp_path_factory.mktemp("replay")
    (root / "measured.csv").write_text(MEASURED)
    (root / "replay.yaml").write_text(CONFIG)
    with pytest.MonkeyPatch.context() as patch:
        # compare reads the frames, not report.html, whose figures take seconds to draw
        patch.setattr(run_report, "write_run_report", lambda run_dir: run_dir / "report.html")
        args = ["run", str(root / "replay.yaml"), "--out", str(root / "run")]
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return root / "run", root / "measured.csv"


def test_compare_prints_the_table_and_writes_html_and_csv(replay: tuple[Path, Path]) -> None:
    run_dir, measured = replay
    result = runner.invoke(app, ["compare", str(run_dir), "--measured", str(measured)])
    assert result.exit_code == 0, result.output
    for label in ["Metric", "Measured", "Simulated", "Diff%", *LABELS]:
        assert label in result.output, label
    assert "Mean abs. Diff%" in result.output and "(12 of 12)" in result.output
    assert "ITL left out" in result.output
    assert "Measured run not in overload" in result.output
    assert "before saturation" not in result.output
    assert "card-after-saturation" not in (run_dir / "compare.html").read_text()
    assert (run_dir / "compare.html").is_file()
    table = pd.read_csv(run_dir / "compare.csv")
    assert len(table) == len(LABELS)
    assert table.set_index("metric").loc["completed", "measured"] == 4


def _one_line_error(args: list[str], expected: str) -> None:
    result = runner.invoke(app, ["compare", *args])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and expected in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_bad_input_is_one_line_exit_2(replay: tuple[Path, Path], tmp_path: Path) -> None:
    run_dir, measured = replay
    _one_line_error([str(tmp_path / "nope"), "--measured", str(measured)], "no such run folder")
    _one_line_error([str(run_dir), "--measured", str(tmp_path / "x.csv")], "no such file")
    partial = tmp_path / "partial"
    shutil.copytree(run_dir, partial)
    (partial / "requests.parquet").unlink()
    _one_line_error([str(partial), "--measured", str(measured)], "missing requests.parquet")
    other = tmp_path / "other.csv"
    other.write_text(MEASURED.replace("0.02,7,9", "0.02,8,9"))
    _one_line_error(
        [str(run_dir), "--measured", str(other)],
        "workload mismatch: request 2 (arrival order) has prompt_tokens 7 in the simulated run "
        "but 8 in the measured run",
    )
    shorter = tmp_path / "shorter.csv"
    shorter.write_text(MEASURED.rsplit("\n", 2)[0] + "\n")
    _one_line_error([str(run_dir), "--measured", str(shorter)], "has 4 requests")


def test_bundled_rtx4090_replay_prints_every_metric(tmp_path: Path) -> None:
    config = ROOT / "configs" / "measured" / "rtx4090_llama31_8b.yaml"
    measured = ROOT / "traces/measured/llmservingsim-vllm0.19/RTX4090_Llama-3.1-8B"
    run_dir, page = tmp_path / "run", tmp_path / "elsewhere" / "page.html"
    write_run(simulate(load_config(config, []), config.parent), run_dir)
    args = ["compare", str(run_dir), "--measured", str(measured), "--out", str(page)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert page.is_file() and (run_dir / "compare.csv").is_file()
    assert not (run_dir / "compare.html").exists()
    for label in LABELS:
        assert label in result.output, label
    # the measured column is the "vLLM" column of LLMServingSim's own validation summary
    # (65,456.6 ms … in seconds from 10 s, to the 10 ms the summary's 0.1 ms rounds to)
    for value in ("65.46 s", "60.11 s", "137.36 s", "32.4 ms", "30.8 ms", "86.58 s", "153.63 s"):
        assert value in result.output, value
    assert "300" in result.output
    # the measured run is overloaded from its 13th request on (its README says the queue grows)
    output = " ".join(result.output.split())
    assert ("Measured run in overload from 1.5 s (its first-token queue never drained again; "
            "287 of 300 requests arrived after)") in output  # fmt: skip
    assert "Mean abs. Diff% before saturation" in output and "(287 requests)." in output
    html = page.read_text()
    assert 'id="card-before-saturation"' in html and 'id="card-after-saturation"' in html


def test_an_out_that_cannot_take_the_page_is_one_line_and_nothing_written(
    replay: tuple[Path, Path], tmp_path: Path
) -> None:
    run_dir, measured = replay
    args = [str(run_dir), "--measured", str(measured), "--out"]
    _one_line_error([*args, str(tmp_path)], "is a folder")
    (tmp_path / "afile").write_text("x")
    _one_line_error([*args, str(tmp_path / "afile" / "page.html")], "cannot create the output")
    mine = tmp_path / "mine.html"
    mine.write_text("<p>mine</p>")
    _one_line_error([*args, str(mine)], "not a simkv page")
    assert mine.read_text() == "<p>mine</p>"
