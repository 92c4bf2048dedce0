"""The Python API (`simkv.simulate`, `Run.latencies`, `Run.report`, `simkv.sweep`,
`simkv.capacity`, `simkv.compare`), and the README's example of it runs as written (so does the
KV core's example in docs/prefix-and-forks.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

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


QUICKSTART = ROOT / "configs" / "quickstart.yaml"


def test_dir_lists_the_api_and_the_names_are_the_functions() -> None:
    import simkv.capacity.run
    import simkv.sweep.run  # binding the packages as attributes hides nothing

    for name in ("simulate", "sweep", "capacity", "compare", "InputError"):
        assert name in dir(simkv)
    assert simkv.sweep is simkv.api.sweep and simkv.capacity is simkv.api.capacity
    assert simkv.compare is simkv.api.compare and simkv.simulate is simkv.api.simulate
    from simkv.sweep import run_sweep  # the packages stay importable by name

    assert callable(run_sweep) and simkv.sweep.__module__ == "simkv.api.searches"


def test_import_simkv_and_dir_load_nothing_else() -> None:
    probe = ("import sys, simkv; dir(simkv); simkv.__version__\n"
             "print(sorted(m for m in sys.modules if m.startswith('simkv')))")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True, cwd=ROOT)  # fmt: skip
    assert proc.stdout.strip() == "['simkv']", proc.stdout


def quickstart_doc() -> dict[str, object]:
    return yaml.safe_load(QUICKSTART.read_text(encoding="utf-8"))


def test_a_mapping_runs_as_its_file_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    by_path = simkv.simulate(QUICKSTART, workload__limit=200)
    by_doc = simkv.simulate(quickstart_doc(), base_dir=QUICKSTART.parent, workload__limit=200)
    assert by_doc.summary == by_path.summary
    pd.testing.assert_frame_equal(by_doc.requests, by_path.requests)
    with pytest.raises(InputError) as err:  # relative to the working directory by default
        simkv.simulate(quickstart_doc(), workload__limit=200)
    assert "AzureLLMInferenceTrace_conv.csv" in str(err.value)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_bad_mapping_is_an_input_error_naming_the_field() -> None:
    doc = {**quickstart_doc(), "kv_cache": {"block_sise": 16}}
    with pytest.raises(InputError, match=r"^kv_cache\.block_sise: unknown key"):
        simkv.simulate(doc, base_dir=QUICKSTART.parent)
    with pytest.raises(TypeError, match="config: expected a path"):
        simkv.simulate(42)  # type: ignore[arg-type]


def test_latency_columns_are_the_summarys(tmp_path: Path) -> None:
    run = simkv.simulate(QUICKSTART, workload__limit=300, percentiles=(50.0,))
    lat = run.latencies
    assert list(lat.columns) == ["ttft_ms", "tpot_ms", "e2el_ms"]
    assert lat.index.equals(run.requests.index)
    for name in ("ttft", "tpot", "e2el"):
        values = lat[f"{name}_ms"].dropna().to_numpy()
        for stat in ("p50", "p90", "p99"):
            q = float(stat[1:])
            assert np.percentile(values, q) == run.summary[f"{stat}_{name}_ms"], (name, stat)
        assert values.mean() == pytest.approx(run.summary[f"mean_{name}_ms"], rel=1e-12)
    one_token = run.requests["generated_tokens"] == 1
    assert lat.loc[one_token, "tpot_ms"].isna().all()
    assert lat["e2el_ms"].iloc[0] == pytest.approx(
        (run.requests["finish_s"].iloc[0] - run.requests["arrival_s"].iloc[0]) * 1e3
    )


def test_report_writes_the_folder_simkv_run_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from simkv.cli import app

    monkeypatch.chdir(tmp_path)
    run = simkv.simulate(QUICKSTART, workload__limit=200)
    page = run.report()
    assert page == Path("reports") / "quickstart" / "report.html" and page.is_file()
    args = ["run", str(QUICKSTART), "--set", "workload.limit=200", "--out", "cli"]
    assert CliRunner().invoke(app, args).exit_code == 0
    for name in ("summary.json", "config.resolved.yaml", "requests.parquet", "report.html"):
        assert (tmp_path / "cli" / name).read_bytes() == (page.parent / name).read_bytes(), name
    with pytest.raises(InputError, match="give another --out"):
        run.report("cli/requests.parquet")  # a file is no run folder


def test_a_mappings_profile_resolves_against_base_dir(tmp_path: Path) -> None:
    from simkv.api.runs import resolve_config
    from simkv.config.profile import read_profile

    doc = {**quickstart_doc(), "cost_model": {"profile": "measured/profiles/host_prior.yaml"}}
    cfg, where = resolve_config(doc, QUICKSTART.parent, {})
    profile = read_profile(QUICKSTART.parent / "measured" / "profiles" / "host_prior.yaml")
    assert where == QUICKSTART.parent and cfg.cost_model == profile
    with pytest.raises(InputError, match=r"^cost_model\.profile: no such profile"):
        resolve_config(doc, tmp_path, {})
