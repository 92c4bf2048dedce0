"""The README followed in order, as a user would: every ``.venv/bin/simkv`` and
``.venv/bin/python`` command of its shell blocks runs, in the order written, in a fresh copy of
the tracked files (``git ls-files``), and each exits 0 without a traceback.

Long (several minutes: it runs every shipped sweep), so it is marked ``readme`` and left out of
the default run; ``make readme`` runs it. Commands that rewrite tracked docs
(``--write-docs``), name placeholders (``SWEEP.yaml``) or install packages are skipped, as are
the long speed benchmarks (``make bench`` covers them).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP = ("--write-docs", "SWEEP.yaml", "pip install", "benchmarks/speed.py")


def readme_commands(text: str) -> list[str]:
    """The README's ``.venv/bin/...`` commands in order (continuation lines joined, trailing
    comments dropped, skipped ones left out)."""
    commands, block, pending = [], False, ""
    for line in text.splitlines():
        if line.startswith("```"):
            block, pending = not block, ""
            continue
        if not block:
            continue
        line = pending + line.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        command = re.sub(r"\s+#.*$", "", line)
        if command.startswith(".venv/bin/") and not any(s in command for s in SKIP):
            commands.append(command)
    return commands


def test_the_walkthrough_parses_the_readme() -> None:
    """(Runs by default: the command list the walkthrough follows is what the README says.)"""
    commands = readme_commands((ROOT / "README.md").read_text())
    assert commands[0] == ".venv/bin/simkv run configs/quickstart.yaml"
    assert any(c.startswith(".venv/bin/simkv compare reports/") and "--measured" in c
               for c in commands)  # fmt: skip
    assert not any(s in c for c in commands for s in SKIP)


@pytest.mark.readme
def test_every_readme_command_runs_in_order(tmp_path: Path) -> None:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()  # fmt: skip
    clone = tmp_path / "clone"
    for name in files:
        target = clone / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    (clone / ".venv").symlink_to(ROOT / ".venv")
    env = {**os.environ, "COLUMNS": "120"}
    for command in readme_commands((clone / "README.md").read_text()):
        done = subprocess.run(command, shell=True, cwd=clone, env=env, capture_output=True,
                              text=True, timeout=900)  # fmt: skip
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{command}\n{output[-2000:]}"
        assert "Traceback" not in output, command
    assert (clone / "reports" / "compare.html").is_file()
