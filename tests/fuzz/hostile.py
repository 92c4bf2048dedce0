"""Shared pieces of the fuzz suite: the tiny config, a fresh folder, and the check that a
hostile input ends cleanly, counted per category (:data:`TRIED`, printed at the end of a run
by ``tests/fuzz/conftest.py``)."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from typer.testing import CliRunner

from simkv.cli import app
from tests.conftest import TINY

runner = CliRunner()
CONFIG = TINY.replace("name: tiny-cli", "name: fuzz")  # the tiny CLI config, named fuzz
TRACE = "arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.01,20,3\n0.02,7,9\n"

TRIED: Counter[str] = Counter()
"""Hostile inputs tried in this test session, per category (hypothesis replays included)."""
CATEGORIES = (
    "YAML structure", "numbers", "strings and names", "--set syntax", "YAML documents and bytes",
    "traces", "output paths", "damaged run folders", "sweep files", "entry point",
)  # fmt: skip


def tried(category: str, n: int = 1) -> None:
    """Count ``n`` hostile inputs of ``category`` (one of :data:`CATEGORIES`)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown fuzz category {category!r}")
    TRIED[category] += n


def folder() -> Path:
    """A fresh folder with the config and its trace (hypothesis forbids function fixtures)."""
    path = Path(tempfile.mkdtemp(prefix="simkv-fuzz-"))
    (path / "trace.csv").write_text(TRACE)
    (path / "c.yaml").write_text(CONFIG)
    return path


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def assert_clean(
    args: list[str], places: tuple[str, ...], category: str | None, ok: bool = True
) -> None:
    """Exit 0 (if ``ok``) or exit 2 with only ``error:`` lines naming one of ``places``;
    counted under ``category`` (None: the caller counts)."""
    if category is not None:
        tried(category)
    result = runner.invoke(app, args)
    output = result.output
    assert "Traceback" not in output, output
    if result.exit_code == 0 and ok:
        return
    assert result.exit_code == 2, (args, output, result.exception)
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines, args
    for line in lines:
        assert line.startswith("error: "), (args, output)
        assert any(place in line for place in places), (args, output)
