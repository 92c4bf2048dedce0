"""Benchmarks print; only ``--write-docs`` rewrites the tracked docs. The demo needs no extras."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT, load_benchmark


@pytest.mark.parametrize("write", [False, True])
def test_speed_writes_docs_only_when_asked(
    write: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    speed = load_benchmark("speed")
    monkeypatch.setattr(speed, "run_cases", lambda names: {})
    monkeypatch.setattr(speed, "render", lambda outcomes, run: "PERFORMANCE\n")
    out = tmp_path / "performance.md"
    argv = ["speed.py", "--quick", "--out", str(out), *(["--write-docs"] if write else [])]
    monkeypatch.setattr(sys, "argv", argv)
    speed.main()
    assert "PERFORMANCE" in capsys.readouterr().out
    assert out.exists() is write


@pytest.mark.parametrize("write", [False, True])
def test_fidelity_writes_docs_only_when_asked_and_keeps_the_other_blocks(
    write: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fidelity = load_benchmark("fidelity")
    monkeypatch.setattr(fidelity, "all_cases", lambda: [])
    monkeypatch.setattr(fidelity, "run_all", lambda cases, workers: {})
    monkeypatch.setattr(fidelity, "render", lambda results, command, wall_s: "FIDELITY\n")
    out = tmp_path / "fidelity.md"
    doc_blocks = load_benchmark("doc_blocks")
    old = doc_blocks.with_block("OLD\n", doc_blocks.SIM_VS_REAL, "REAL NUMBERS\n")
    out.write_text(doc_blocks.with_block(old, doc_blocks.CPU_LIVE, "CPU NUMBERS\n"))
    before = out.read_text()
    argv = ["fidelity.py", "--out", str(out), *(["--write-docs"] if write else [])]
    monkeypatch.setattr(sys, "argv", argv)
    fidelity.main()
    text = out.read_text()
    if write:
        assert text.startswith("FIDELITY") and "OLD" not in text
        for name in (doc_blocks.SIM_VS_REAL, doc_blocks.CPU_LIVE):
            assert doc_blocks.block_of(text, name) == doc_blocks.block_of(before, name)
        assert "REAL NUMBERS" in text and "CPU NUMBERS" in text
    else:
        assert text == before


@pytest.mark.parametrize("write", [False, True])
def test_doc_timings_write_docs_only_when_asked_and_record_the_load(
    write: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    timings = load_benchmark("doc_timings")
    (tmp_path / "docs").mkdir()
    monkeypatch.setattr(timings, "ROOT", tmp_path)
    monkeypatch.setitem(timings.CASES, "quickstart", "true --out {out}")
    argv = ["doc_timings.py", "--cases", "quickstart", *(["--write-docs"] if write else [])]
    monkeypatch.setattr(sys, "argv", argv)
    timings.main()
    out = capsys.readouterr().out
    assert "| `true` |" in out and "load (1 min)" in out and " UTC" in out
    assert (tmp_path / "docs" / "timings.md").exists() is write


def test_demo_installs_no_extras_and_test_installs_test_and_ray_extras(tmp_path: Path) -> None:
    def commands(target: str) -> str:
        venv = tmp_path / f"venv-{target}"  # a fresh venv: make plans the whole install
        plan = subprocess.run(
            ["make", "-n", "--no-print-directory", "-C", str(ROOT), target, f"VENV={venv}"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return plan.stdout

    demo = commands("demo")
    assert "pip install -e .\n" in demo and "[" not in demo.replace("[ -", "")
    test = commands("test")
    assert "pip install -e '.[test,ray]'" in test
    assert "--quiet" not in demo + test  # a first install shows pip's progress


def test_license_is_an_spdx_string() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert "license-files" in project


@pytest.mark.parametrize("write", [False, True])
def test_kv_tiers_writes_its_evidence_only_when_asked(
    write: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    bench = load_benchmark("kv_tiers")
    for name in ("curves", "agentic_study", "bandwidth_and_capacity"):
        monkeypatch.setattr(bench, name, lambda: [["a", "b"]])
    monkeypatch.setattr(bench, "DOC", tmp_path / "kv-tiers-evidence.md")
    monkeypatch.setattr(sys, "argv", ["kv_tiers.py", *(["--write-docs"] if write else [])])
    bench.main()
    assert "# KV offload tiers: the evidence" in capsys.readouterr().out
    assert (tmp_path / "kv-tiers-evidence.md").exists() is write
