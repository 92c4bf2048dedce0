"""The hostile suites' helpers: exit 2 with one located ``error:`` line and no traceback; CLI
calls with the fault hook; the real entry point as a subprocess; snapshots of a folder's
bytes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from simkv.cli import app
from simkv.outputs import faults

runner = CliRunner()

SYNTHETIC = """\
name: bounds
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
"""A small synthetic run config: 50 requests of 10 + 5 tokens in 10 s."""


def one_error(args: list[str], place: str) -> str:
    """Run ``simkv ARGS``: exit 2 with one ``error:`` line that names ``place``, no traceback;
    the line without its ``error: `` prefix."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    assert place in lines[0], lines[0]
    return lines[0].removeprefix("error: ")


def succeeds(args: list[str]) -> str:
    """Run ``simkv ARGS``: exit 0; its output."""
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


def errors(args: list[str]) -> list[str]:
    """Run ``simkv ARGS``: exit 2, only ``error:`` lines, no traceback; the lines without the
    prefix."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert all(line.startswith("error: ") for line in lines), result.output
    return [line.removeprefix("error: ") for line in lines]


SIMKV = Path(sys.executable).parent / "simkv"


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) by relative path, with its bytes."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def invoke(args: list[str], fault: str | None = None) -> tuple[int, str]:
    """``simkv ARGS`` in process (``fault``: the SIMKV_FAULT hook); exit code and output."""
    faults.reset()
    env = {"SIMKV_FAULT": fault or ""}
    result = runner.invoke(app, args, env=env)
    return result.exit_code, result.output


def spawn(args: list[str], cwd: Path, fault: str | None = None) -> subprocess.CompletedProcess:
    """``simkv ARGS`` through the installed entry point (``fault``: the SIMKV_FAULT hook)."""
    env = {"SIMKV_FAULT": fault or "", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [str(SIMKV), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def write_paths(args: list[str], cwd: Path) -> list[str]:
    """The path of each write step ``simkv ARGS`` takes, in order (the hook's ``list`` mode);
    the command runs in a copy of nothing: call it where its output may be written."""
    done = spawn(args, cwd, "list")
    assert done.returncode in (0, 1), done.stderr
    return re.findall(r"^fault point \d+: (.*)$", done.stderr, re.M)


def write_steps(args: list[str], cwd: Path) -> int:
    """How many write steps ``simkv ARGS`` takes."""
    return len(write_paths(args, cwd))


def one_line(output: str) -> str:
    """The output's only line, checked to be one and free of a traceback."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def leftovers(parent: Path) -> list[str]:
    """simkv's hidden siblings left in ``parent`` (staging, previous, temporary files)."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))
