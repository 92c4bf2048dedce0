"""`simkv waste`: files written on success; one-line errors (exit 2) on bad input."""

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simkv.cli import app

runner = CliRunner()

OUTPUTS = [
    "waste_static.csv",
    "waste_replay.csv",
    "waste_breakdown.png",
    "waste_breakdown.svg",
    "waste_vs_block_size.png",
    "waste_vs_block_size.svg",
]
SMALL = ["--pool-slots", "256", "--max-context", "64", "--replay-requests", "20"]


def _azure_csv(path: Path, rows: int = 30) -> Path:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(rows):
        prompt, output = 5 + (7 * i) % 40, 3 + (5 * i) % 20
        lines.append(f"2023-11-16 18:17:{i:02d}.0000000,{prompt},{output}")
    lines.append("2023-11-16 18:18:00.0000000,100,5")  # 105 > max context 64
    path.write_text("\n".join(lines) + "\n")
    return path


def test_waste_writes_tables_and_files(tmp_path):
    trace = _azure_csv(tmp_path / "tiny.csv")
    out = tmp_path / "out"
    result = runner.invoke(app, ["waste", str(trace), "--out", str(out), *SMALL])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted([*OUTPUTS, ".simkv-output"])
    assert "excluded 1 of 31 sequences longer than max context 64" in result.output
    assert "Static snapshot" in result.output and "Pool replay" in result.output
    assert result.output.count("wrote ") == 6
    svg = (out / "waste_breakdown.svg").read_bytes()
    runner.invoke(app, ["waste", str(trace), "--out", str(out), *SMALL])
    assert (out / "waste_breakdown.svg").read_bytes() == svg  # byte-stable


def test_waste_default_out_dir_and_plain_length_column(tmp_path, monkeypatch):
    trace = tmp_path / "lens.csv"
    trace.write_text("id,tokens\n1,12\n2,40\n3,7\n")
    monkeypatch.chdir(tmp_path)
    args = ["waste", str(trace), "--column", "tokens", "--block-sizes", "4,16", *SMALL]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = tmp_path / "reports" / "waste-lens"
    assert sorted(p.name for p in out.iterdir()) == sorted([*OUTPUTS, ".simkv-output"])
    static = (out / "waste_static.csv").read_text().splitlines()
    assert static[1].startswith("paged,4,59,60,0.01666")  # 12+40+7 tokens, 3+10+2 blocks of 4


def test_scheme_that_skips_every_request_reports_na(tmp_path):
    trace = _azure_csv(tmp_path / "tiny.csv")
    args = ["--pool-slots", "32", "--max-context", "64", "--out", str(tmp_path / "o")]
    result = runner.invoke(app, ["waste", str(trace), *args])
    assert result.exit_code == 0, result.output
    # max reserves 64 slots > the 32-slot pool: all 30 kept requests skipped
    assert "│ max    │ n/a" in result.output
    replay = (tmp_path / "o" / "waste_replay.csv").read_text().splitlines()
    assert replay[1] == "max,,0,30,0,0,,,,,"


BAD_FILES = [
    ("length\n5\nabc\n", ":3 length: not a number: 'abc'"),
    ("length\n5\n-3\n", ":3 length: must be ≥ 1, got -3"),
    ("len\n5\n", ":1 length: missing column 'length'"),
]


@pytest.mark.parametrize(("content", "expected"), BAD_FILES)
def test_bad_trace_is_one_line_exit_2(tmp_path, content, expected):
    trace = tmp_path / "bad.csv"
    trace.write_text(content)
    result = runner.invoke(app, ["waste", str(trace), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert result.output.startswith(f"error: {trace}{expected}")
    assert "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--block-sizes", "4,x"], "error: --block-sizes: expected comma-separated integers"),
        (["--block-sizes", "0"], "error: block_sizes.0: Input should be greater than 0"),
        (["--pool-slots", "100"], "error: pool_slots (100) must be a multiple"),
        (["--max-context", "-1"], "error: max_context_len: Input should be greater than 0"),
    ],
)
def test_bad_option_value_is_one_line_exit_2(tmp_path, option, expected):
    trace = _azure_csv(tmp_path / "tiny.csv")
    result = runner.invoke(app, ["waste", str(trace), *option])
    assert result.exit_code == 2
    assert result.output.startswith(expected)
    assert result.output.count("\n") == 1


def test_missing_file_through_installed_entry_point(tmp_path):
    simkv = Path(sys.executable).parent / "simkv"
    missing = tmp_path / "nope.csv"
    proc = subprocess.run(
        [str(simkv), "waste", str(missing)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"error: {missing}: cannot read")
    assert proc.stderr.count("\n") == 1
