"""``simkv trace --from S --to S --limit N``: a window of simulated time and a cap on request
tracks; a bad value is one line naming the option, exit code 2, and no trace is written."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from simkv.cli import app
from tests.engine.helpers import tiny_data

runner = CliRunner()


@pytest.fixture
def run_dir(tiny: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    assert runner.invoke(app, ["run", str(tiny), "--out", str(out)]).exit_code == 0
    return out


def _tracks(doc: dict) -> set[int]:
    return {e["tid"] - 1 for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 2}


def test_window_and_limit_select_steps_and_requests(run_dir: Path) -> None:
    whole = runner.invoke(app, ["trace", str(run_dir)])
    assert whole.exit_code == 0, whole.output
    doc = json.loads((run_dir / "trace.json").read_text())
    assert _tracks(doc) == {0, 1, 2} and doc["otherData"]["window_s"] == [None, None]
    result = runner.invoke(app, ["trace", str(run_dir), "--limit", "1", "--to", "0.005"])
    assert result.exit_code == 0, result.output
    doc = json.loads((run_dir / "trace.json").read_text())
    assert _tracks(doc) == {0} and doc["otherData"]["requests_left_out"] == 0  # only req 0 by then
    assert doc["otherData"]["window_s"] == [None, 0.005]
    late = runner.invoke(app, ["trace", str(run_dir), "--from", "1000"])
    assert late.exit_code == 0, late.output
    doc = json.loads((run_dir / "trace.json").read_text())
    assert _tracks(doc) == set() and not [e for e in doc["traceEvents"] if e["ph"] == "X"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--from", "2", "--to", "1"], "error: --to: must be after --from (2 s), got 1"),
        (["--from", "-1"], "error: --from: expected seconds ≥ 0, got -1"),
        (["--to", "inf"], "error: --to: expected seconds ≥ 0, got inf"),
        (["--limit", "0"], "error: --limit: expected at least 1 request, got 0"),
    ],
)
def test_bad_values_are_one_line_exit_2(run_dir: Path, args: list[str], line: str) -> None:
    result = runner.invoke(app, ["trace", str(run_dir), *args])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [line]
    assert not (run_dir / "trace.json").exists()


def test_a_preempted_request_is_split_and_an_old_folder_says_it_is_not(tmp_path: Path) -> None:
    """``simkv run`` writes preemptions.parquet, and ``simkv trace`` splits the preempted
    request's track there; without the file (an older simkv's folder) the spans stay unsplit,
    the trace's metadata and a line on stderr say so."""
    config, out = tmp_path / "preempts.yaml", tmp_path / "preempts"
    data = tiny_data(tmp_path, [(0.0, 4, 9), (0.0, 4, 3)], {"kind": "vllm_v0", "watermark": 0.0},
                     num_blocks=4, max_model_len=16)  # fmt: skip
    config.write_text(yaml.safe_dump(data))
    assert runner.invoke(app, ["run", str(config), "--out", str(out)]).exit_code == 0
    assert len(pd.read_parquet(out / "preemptions.parquet")) == 1  # request 1, by recompute
    result = runner.invoke(app, ["trace", str(out)])
    assert result.exit_code == 0 and result.stderr == "", result.output
    doc = json.loads((out / "trace.json").read_text())
    names = [e["name"] for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] == 2]
    assert names == ["queued", "prefill", "decode", "preempted (recompute)",
                     "recompute prefill", "decode"]  # fmt: skip
    assert doc["otherData"]["preempted_spans"] == "split"
    (out / "preemptions.parquet").unlink()
    result = runner.invoke(app, ["trace", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"note: {out}: no preemptions.parquet")
    doc = json.loads((out / "trace.json").read_text())
    names = [e["name"] for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] == 2]
    assert names == ["queued", "prefill", "decode (preempted 1×)"]
    assert doc["otherData"]["preempted_spans"] == "unsplit"
