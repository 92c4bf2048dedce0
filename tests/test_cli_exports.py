"""`simkv run --format csv`, `simkv report` on CSV frames, and the Chrome/Perfetto trace."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from simkv.cli import app

runner = CliRunner()


def test_csv_frames_round_trip_and_rebuild_the_report(tiny: Path, tmp_path: Path) -> None:
    csv_dir, pq_dir = tmp_path / "csv", tmp_path / "pq"
    for fmt, out in (("csv", csv_dir), ("parquet", pq_dir)):
        result = runner.invoke(app, ["run", str(tiny), "--out", str(out), "--format", fmt])
        assert result.exit_code == 0, result.output
    for name in ("requests", "steps", "itl"):
        assert (csv_dir / f"{name}.csv").is_file() and not (csv_dir / f"{name}.parquet").exists()
        got = pd.read_csv(csv_dir / f"{name}.csv")
        want = pd.read_parquet(pq_dir / f"{name}.parquet")
        assert list(got.columns) == list(want.columns)
        numeric = want.select_dtypes("number").columns
        pd.testing.assert_frame_equal(got[numeric], want[numeric], check_dtype=False)
    (csv_dir / "report.html").unlink()
    rebuilt = runner.invoke(app, ["report", str(csv_dir)])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert (csv_dir / "report.html").stat().st_size > 10_000


def test_rerun_in_another_format_leaves_one_format(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    runner.invoke(app, ["run", str(tiny), "--out", str(out), "--format", "csv"])
    runner.invoke(app, ["run", str(tiny), "--out", str(out)])
    assert not list(out.glob("*.csv"))


def test_trace_is_trace_event_format(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert runner.invoke(app, ["run", str(tiny), "--out", str(out), "--trace"]).exit_code == 0
    doc = json.loads((out / "trace.json").read_text())
    events = doc["traceEvents"]
    steps = [e for e in events if e["ph"] == "X" and e["pid"] == 1]
    assert len(steps) == len(pd.read_parquet(out / "steps.parquet"))
    for event in events:
        assert event["ph"] in {"X", "C", "M", "i"}
        if event["ph"] == "X":
            assert event["dur"] >= 0 and event["ts"] >= 0 and "tid" in event
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"engine", "steps", "requests", "req 0", "req 1", "req 2"} <= names
    spans = [e["name"] for e in events if e["ph"] == "X" and e["pid"] == 2 and e["tid"] == 1]
    assert spans == ["queued", "prefill", "decode"]
    again = runner.invoke(app, ["trace", str(out)])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "trace.json").read_text()) == doc


def test_trace_of_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["trace", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "missing requests" in result.output
