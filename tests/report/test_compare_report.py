"""The simulated-vs-measured page: tick binning by hand, contents, left-out panels.

The measured run is a tiny LLMServingSim-style folder (four requests, a one-second load time
series); the simulated run replays it with a ``kind: measured`` workload.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simkv.report import compare_figures as cf
from simkv.report.compare_real import (
    compare_with_measured,
    diff_level,
    measured_load,
    render_comparison,
    write_comparison,
)
from simkv.run import load_config, simulate, write_run

# (request_id, input_toks, output_toks, queued, first token, last token), engine clock (s)
REQUESTS = [
    ("bench-0", 10, 5, 100.0, 100.05, 100.2), ("bench-1", 20, 3, 100.01, 100.07, 100.2),
    ("bench-2", 7, 9, 100.02, 100.1, 100.45), ("bench-3", 12, 1, 100.5, 100.53, 100.53),
]  # fmt: skip
CONFIG = """\
name: tiny-replay
workload: {kind: measured, path: MEASURED}
model: {preset: llama-2-7b, max_model_len: 64}
gpu: a100-80gb
kv_cache: {block_size: 4, num_blocks: 40}
scheduler: {kind: vllm_v1}
"""


def write_measured_folder(folder: Path, kv_pct: tuple[float, ...] | None) -> Path:
    """The tiny measurement; ``timeseries.csv`` with ``kv_pct`` per tick (None: no file)."""
    folder.mkdir(parents=True)
    lines = [json.dumps({"request_id": rid, "input_toks": p, "output_toks": o, "queued_ts": q,
                         "scheduled_ts": q, "first_token_ts": f, "last_token_ts": e})
             for rid, p, o, q, f, e in REQUESTS]  # fmt: skip
    (folder / "requests.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "meta.json").write_text("{}")
    if kv_pct is not None:
        rows = [f"{t + 1}.0,100.0,50.0,{3 - t},{t},{kv}" for t, kv in enumerate(kv_pct)]
        header = "t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n"
        (folder / "timeseries.csv").write_text(header + "\n".join(rows) + "\n")
    return folder


def simulate_replay(root: Path, measured: Path) -> Path:
    """Simulate the replay of ``measured`` and write its run folder ``root/run``."""
    config = root / "replay.yaml"
    config.write_text(CONFIG.replace("MEASURED", str(measured)))
    write_run(simulate(load_config(config, []), root), root / "run")
    return root / "run"


def steps(rows: list[tuple[float, float, int, int, int, int]]) -> pd.DataFrame:
    columns = ["time_s", "duration_s", "num_running", "num_waiting", "blocks_used", "blocks_free"]
    return pd.DataFrame(rows, columns=columns)


def test_sim_ticks_weight_steps_by_overlap_and_idle_as_zero() -> None:
    # running 2 over [0, 0.5), 4 over [0.5, 1.2), idle [1.2, 1.5), 1 over [1.5, 2.0)
    frame = steps([(0.0, 0.5, 2, 6, 10, 30), (0.5, 0.7, 4, 0, 20, 20), (1.5, 0.5, 1, 0, 4, 36)])
    ticks = cf.sim_ticks(frame, np.array([1.0, 2.0]), 1.0)
    assert ticks["running"].to_numpy() == pytest.approx([2 * 0.5 + 4 * 0.5, 4 * 0.2 + 1 * 0.5])
    assert ticks["waiting"].to_numpy() == pytest.approx([3.0, 0.0])
    assert ticks["kv_usage_pct"].to_numpy() == pytest.approx([25 * 0.5 + 50 * 0.5, 10 + 5])


def test_tick_grid_continues_past_the_measurement() -> None:
    ends, tick = cf.tick_grid(np.array([1.0, 2.0, 3.0]), until_s=5.5)
    assert tick == 1.0
    assert ends.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert cf.tick_grid(np.array([1.0, 2.0]), until_s=1.5)[0].tolist() == [1.0, 2.0]


def test_diff_levels() -> None:
    levels = [diff_level(d) for d in (None, 0.0, -4.9, 5.0, -14.9, 15.0, 300.0)]
    assert levels == ["none", "close", "close", "fair", "fair", "far", "far"]


def test_page_has_table_figures_and_csv(tmp_path: Path) -> None:
    measured = write_measured_folder(tmp_path / "real", (40.0, 20.0))
    cmp = compare_with_measured(simulate_replay(tmp_path, measured), measured)
    html_path, csv_path = write_comparison(cmp, tmp_path / "out" / "c.html", tmp_path / "c.csv")
    page = html_path.read_text()
    for ident in ("validation-table", "card-mean-abs-diff", "fig-latency-cdf", "fig-load",
                  "row-mean_ttft_ms", "row-p95_e2el_ms", "row-completed"):  # fmt: skip
        assert f'id="{ident}"' in page, ident
    assert "<script" not in page and "http" not in page.replace("http://www.w3.org", "")
    assert "ITL left out: no per-token times in the measured run" in page
    table = pd.read_csv(csv_path)
    assert list(table.columns) == ["metric", "measured", "simulated", "diff_pct"]
    assert len(table) == 18  # TTFT, TPOT, E2E × 5 statistics, two throughputs, completed
    row = table.set_index("metric").loc["mean_e2el_ms"]
    assert row["measured"] == pytest.approx(np.mean([200.0, 190.0, 430.0, 30.0]))
    assert row["diff_pct"] == pytest.approx((row["simulated"] / row["measured"] - 1) * 100)
    assert measured_load(cmp)[1] == ["running", "waiting", "kv_usage_pct"]


def test_unlogged_series_and_missing_timeseries_are_left_out_with_a_note(tmp_path: Path) -> None:
    zeros = write_measured_folder(tmp_path / "zeros", (0.0, 0.0))  # KV usage not logged
    run_dir = simulate_replay(tmp_path, zeros)
    cmp = compare_with_measured(run_dir, zeros)
    frame, columns, notes = measured_load(cmp)
    assert frame is not None and columns == ["running", "waiting"]
    assert notes == ["KV usage (%) over time left out: the measured run did not log it."]
    bare = write_measured_folder(tmp_path / "bare", None)
    page = render_comparison(compare_with_measured(run_dir, bare))
    assert "Load over time left out: the measured run has no time series." in page
    assert 'id="fig-load"' not in page
