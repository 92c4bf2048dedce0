"""`simkv.simulate` for notebooks, and the README's example of it runs as written (so does the
KV core's example in docs/prefix-and-forks.md)."""

from __future__ import annotations

import re

import pytest

import simkv
from simkv.errors import InputError
from simkv.run import load_config
from tests.conftest import ROOT


def readme_block(heading: str, doc: str = "README.md") -> str:
    """The first ```python block after ``heading`` in ``doc`` (README.md by default)."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    start = text.index(heading)
    match = re.search(r"```python\n(.*?)```", text[start:], re.S)
    if match is None:
        raise AssertionError(f"no python block after {heading!r}")
    return match.group(1)


def test_the_readme_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    scope: dict[str, object] = {}
    exec(compile(readme_block("## Python API"), "README.md", "exec"), scope)
    run = scope["run"]
    assert isinstance(run, simkv.api.RunOutput)
    assert run.summary["num_requests"] == 2_000
    assert len(run.requests) == 2_000 and len(run.steps) == run.summary["num_steps"]
    assert run.config.kv_cache.block_size == 32


def test_the_kv_core_example_of_the_guide_runs() -> None:
    scope: dict[str, object] = {}
    doc = "docs/prefix-and-forks.md"
    exec(compile(readme_block("## The KV core's Python API", doc), doc, "exec"), scope)
    seq, child, alloc = scope["seq"], scope["child"], scope["alloc"]
    assert isinstance(alloc, simkv.BlockAllocator) and alloc.free_blocks == 6
    assert isinstance(seq, simkv.SequenceTable) and isinstance(child, simkv.SequenceTable)


def test_overrides_and_config_objects_agree() -> None:
    path = ROOT / "configs" / "quickstart.yaml"
    by_path = simkv.simulate(path, workload__limit=300, percentiles=(99.9,))
    cfg = load_config(path, ["workload.limit=300"])
    by_object = simkv.simulate(cfg, base_dir=path.parent, percentiles=(99.9,))
    assert by_path.summary == by_object.summary
    assert "p99.9_ttft_ms" in by_path.summary
    other = simkv.simulate(cfg, base_dir=path.parent, workload__limit=100)
    assert other.summary["num_requests"] == 100


def test_a_bad_override_is_an_input_error() -> None:
    with pytest.raises(InputError, match="block_sise"):
        simkv.simulate(ROOT / "configs" / "quickstart.yaml", kv_cache__block_sise=3)
