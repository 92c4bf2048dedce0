"""Hostile inputs through the real CLI: configs, ``--set`` items, traces, outputs, run folders.

Every case must end with exit 0 (a value that happens to be valid) or exit 2 with only
``error: <place> ...`` lines (the place: the file, ``--set``, or the folder/file at fault), never
a traceback, and must not change anything already written. The tables run in CI; the
hypothesis searches run a few hundred examples in CI and many more under ``make fuzz``
(marker ``fuzz``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simkv.cli import app
from tests.conftest import TINY

runner = CliRunner()
CI_EXAMPLES = 100
LONG_EXAMPLES = 3000
CI = settings(max_examples=CI_EXAMPLES, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
LONG_TRACES = settings(max_examples=500, deadline=None,  # ~0.4 s each when valid
                       suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
CI_TRACES = settings(max_examples=40, deadline=None,  # a valid trace draws figures: slower
                     suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
LONG = settings(max_examples=LONG_EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])  # fmt: skip

CONFIG = TINY.replace("name: tiny-cli", "name: fuzz")  # the tiny CLI config, named fuzz
TRACE = "arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.01,20,3\n0.02,7,9\n"


def _folder() -> Path:
    """A fresh folder with the config and its trace (hypothesis forbids function fixtures)."""
    folder = Path(tempfile.mkdtemp(prefix="simkv-fuzz-"))
    (folder / "trace.csv").write_text(TRACE)
    (folder / "c.yaml").write_text(CONFIG)
    return folder


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def assert_clean(args: list[str], places: tuple[str, ...], ok: bool = True) -> None:
    """Exit 0 (if ``ok``) or exit 2 with only ``error:`` lines naming one of ``places``."""
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


# --- configs: a table of hostile documents -------------------------------------------------

BOMB = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"b{i}: &b{i} [" + ",".join([f"*{'a' if i == 1 else f'b{i - 1}'}"] * 10) + "]\n"
    for i in range(1, 9)
)
HOSTILE_CONFIGS: list[bytes] = [
    BOMB.encode(),
    ("x: " + "[" * 5000 + "]" * 5000 + "\n").encode(),
    b"name: caf\xe9\n",
    b"\xff\xfe\x00n\x00a\x00m\x00e",
    CONFIG.encode() + b"name: twice\n",
    ("seed: " + "9" * 5000 + "\n").encode(),
    b"a: &a [*a]\n",
    b"- just\n- a list\n",
    b"just a string\n",
    b"name: [unclosed\n",
    b"\t\tname: tabs\n",
    b"name: !!python/object/apply:os.system [echo hi]\n",
    CONFIG.replace("name: fuzz", "name: ..").encode(),
    CONFIG.replace("name: fuzz", "name: " + "a" * 300).encode(),
    CONFIG.replace("num_blocks: 40", "num_blocks: true").encode(),
    CONFIG.replace("num_blocks: 40", "num_blocks: .inf").encode(),
    CONFIG.replace("num_blocks: 40", "capacity_gib: .inf").encode(),
    CONFIG.replace("num_blocks: 40", "num_blocks: 40, swap_space_gib: .nan").encode(),
    CONFIG.replace("block_size: 4", "block_sise: 4").encode(),
    CONFIG.replace("max_model_len: 64", "max_model_len: 1e30").encode(),
    CONFIG.replace("max_model_len: 64", "max_model_len: 100000000000000").encode(),
    CONFIG.replace("kind: vllm_v1", "kind: orca, max_num_seqs: 4").encode(),
    CONFIG.replace("kind: vllm_v1", "kind: nonsense").encode(),
    CONFIG.replace("gpu: a100-80gb", "gpu: {preset: a100-80gb, memory_gib: .inf}").encode(),
    CONFIG.replace("model: {preset", "model: {preset: no-such-model, x").encode(),
    (CONFIG + "parallel: {tensor_parallel: 1000000000}\n").encode(),
    (CONFIG + "parallel: {tensor_parallel: 3}\n").encode(),
    (CONFIG + "cost_model: {step_overhead_ms: .inf}\n").encode(),
    (CONFIG + "cost_model: {profile: nowhere.yaml}\n").encode(),
    (CONFIG + "slo: {ttft_ms: -1}\n").encode(),
    b"",
]


AT_RUN_TIME: list[bytes] = [  # valid configs naming files that are not there or not traces
    (CONFIG + "cost_model: {kind: table, path: nowhere.csv}\n").encode(),
    CONFIG.replace("path: trace.csv", "path: /dev/null").encode(),
    CONFIG.replace("path: trace.csv", "path: missing.csv").encode(),
    CONFIG.replace("path: trace.csv", "path: .").encode(),
]


@pytest.mark.parametrize("index", range(len(HOSTILE_CONFIGS)))
def test_hostile_config_is_one_error_per_problem(index: int) -> None:
    folder = _folder()
    (folder / "c.yaml").write_bytes(HOSTILE_CONFIGS[index])
    before = _snapshot(folder)
    assert_clean(["validate", str(folder / "c.yaml")], (str(folder),), ok=False)
    assert _snapshot(folder) == before
    shutil.rmtree(folder)


@pytest.mark.parametrize("raw", [*HOSTILE_CONFIGS[1:30:7], *AT_RUN_TIME])
def test_hostile_config_runs_fail_without_output(raw: bytes) -> None:
    folder = _folder()
    (folder / "c.yaml").write_bytes(raw)
    out = folder / "out"
    places = (str(folder), "/dev/null")
    assert_clean(["run", str(folder / "c.yaml"), "--out", str(out)], places, ok=False)
    assert not out.exists()
    shutil.rmtree(folder)


# --- --set items: hypothesis over key paths and hostile values -----------------------------

KEYS = [
    "name", "seed", "workload.kind", "workload.path", "workload.limit", "workload.time_scale",
    "workload.rate", "workload.start_s", "model", "model.max_model_len", "model.num_layers",
    "gpu", "gpu.memory_gib", "parallel.tensor_parallel", "kv_cache.block_size",
    "kv_cache.num_blocks", "kv_cache.capacity_gib", "kv_cache.swap_space_gib",
    "kv_cache.gpu_memory_utilization", "kv_cache.prefix_caching", "scheduler.kind",
    "scheduler.max_num_seqs", "scheduler.max_num_batched_tokens", "scheduler.policy",
    "preemption.mode", "preemption.victim", "cost_model.kind", "cost_model.step_overhead_ms",
    "cost_model.gemm_efficiency", "slo.ttft_ms", "kv_cache.blocksize", "nosuch.key", "x",
]  # fmt: skip
VALUES = [
    "", "null", "true", "false", "0", "-1", "1", "3", "1e30", ".inf", "-.inf", ".nan",
    "9" * 60, "1.5", "[]", "{}", "[1, 2]", "{kind: orca}", "orca", "table", "roofline",
    "static", "vllm_v0", "swap", "hash", "radix", "..", "a" * 300, "'$\\foo$'", "&a [*a]",
    "[" * 200 + "]" * 200, "!!binary aGk=", "2023-01-01", "0x10", "1_000", "9" * 5000,
]  # fmt: skip
set_items = st.tuples(
    st.sampled_from(KEYS) | st.from_regex(r"[a-z_]{1,8}(\.[a-z_]{1,8}){0,3}", fullmatch=True),
    st.sampled_from(VALUES) | st.text(max_size=20),
)


def _check_set(items: list[tuple[str, str]]) -> None:
    folder = _folder()
    args = ["validate", str(folder / "c.yaml")]
    for key, value in items:
        args += ["--set", f"{key}={value}"]
    assert_clean(args, ("--set", str(folder)))
    shutil.rmtree(folder)


@CI
@given(items=st.lists(set_items, min_size=1, max_size=3))
def test_fuzz_set_items(items: list[tuple[str, str]]) -> None:
    _check_set(items)


@pytest.mark.fuzz
@LONG
@given(items=st.lists(set_items, min_size=1, max_size=4))
def test_fuzz_set_items_long(items: list[tuple[str, str]]) -> None:
    _check_set(items)


# --- whole documents: random YAML-ish text and bytes ---------------------------------------

yaml_text = st.text(alphabet=st.sampled_from(list("ab: -[]{}&*!\n\t'\"#,0.9e|>%@`\\")), max_size=80)


def _check_document(raw: bytes) -> None:
    folder = _folder()
    (folder / "c.yaml").write_bytes(raw)
    assert_clean(["validate", str(folder / "c.yaml")], (str(folder),), ok=False)
    shutil.rmtree(folder)


@CI
@given(raw=st.one_of(yaml_text.map(str.encode), st.binary(max_size=60)))
def test_fuzz_documents(raw: bytes) -> None:
    _check_document(raw)


@pytest.mark.fuzz
@LONG
@given(raw=st.one_of(yaml_text.map(str.encode), st.binary(max_size=200)))
def test_fuzz_documents_long(raw: bytes) -> None:
    _check_document(raw)


# --- traces: hostile cells in a lengths trace through `simkv waste` --------------------------

CELLS = ["1e30", "3000000000", "-3", "0", "true", "nan", "inf", "", "abc", "1.5", "9" * 400,
         "2023-01-01T00:00:00+01:00", '"x,y"', "\xe9"]  # fmt: skip
cells = st.sampled_from(CELLS) | st.integers(1, 100).map(str)


def _check_trace(rows: list[str], jsonl: bool) -> None:
    folder = _folder()
    if jsonl:
        body = "".join('{"length": ' + (r if r else "null") + "}\n" for r in rows)
        trace = folder / "t.jsonl"
    else:
        body = "length\n" + "".join(r + "\n" for r in rows)
        trace = folder / "t.csv"
    trace.write_bytes(body.encode("latin-1", errors="replace"))
    out = folder / "out"
    assert_clean(["waste", str(trace), "--out", str(out), "--replay-requests", "5"], (str(trace),))
    shutil.rmtree(folder)


@CI_TRACES
@given(rows=st.lists(cells, min_size=1, max_size=5), jsonl=st.booleans())
def test_fuzz_traces(rows: list[str], jsonl: bool) -> None:
    _check_trace(rows, jsonl)


@pytest.mark.fuzz
@LONG_TRACES
@given(rows=st.lists(cells | st.text(max_size=10), min_size=1, max_size=8), jsonl=st.booleans())
def test_fuzz_traces_long(rows: list[str], jsonl: bool) -> None:
    _check_trace(rows, jsonl)


def test_deeply_nested_jsonl_trace() -> None:
    folder = _folder()
    trace = folder / "t.jsonl"
    trace.write_text('{"length": 4}\n{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    assert_clean(["waste", str(trace), "--out", str(folder / "o")], (f"{trace}:2",), ok=False)
    shutil.rmtree(folder)


# --- outputs and run folders ---------------------------------------------------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    (folder / "trace.csv").write_text(TRACE)
    (folder / "c.yaml").write_text(CONFIG)
    result = runner.invoke(app, ["run", str(folder / "c.yaml"), "--out", str(folder / "run")])
    assert result.exit_code == 0, result.output
    return folder / "run"


DAMAGE: dict[str, bytes | None] = {
    "summary.json": b"[1, 2]",
    "config.resolved.yaml": b"\x00\x01\xff",
    "requests.parquet": b"garbage",
    "steps.parquet": b"PAR1",
    "itl.parquet": b"",
}


@pytest.mark.parametrize(("name", "content"), [*DAMAGE.items(), ("summary.json", None)])
def test_report_on_damaged_folder(
    run_dir: Path, tmp_path: Path, name: str, content: bytes | None
) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(run_dir, folder)
    if content is None:
        (folder / name).unlink()
    else:
        (folder / name).write_bytes(content)
    before = _snapshot(folder)
    assert_clean(["report", str(folder)], (str(folder),), ok=False)
    assert _snapshot(folder) == before


@pytest.mark.parametrize("out", ["/dev/null", "{file}", "{file}/sub"])
def test_out_that_cannot_be_a_folder(tmp_path: Path, out: str) -> None:
    folder = _folder()
    (folder / "file").write_text("kept")
    target = out.format(file=folder / "file")
    assert_clean(["run", str(folder / "c.yaml"), "--out", target], (target,), ok=False)
    assert (folder / "file").read_text() == "kept"
    shutil.rmtree(folder)


# --- the installed entry point -------------------------------------------------------------

SIMKV = Path(sys.executable).with_name("simkv")


@pytest.mark.skipif(not SIMKV.exists(), reason="simkv entry point not installed")
@pytest.mark.parametrize("index", [0, 1, 2, 5, 14])
def test_entry_point_one_line_no_traceback(index: int) -> None:
    folder = _folder()
    (folder / "c.yaml").write_bytes(HOSTILE_CONFIGS[index])
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [str(SIMKV), "validate", str(folder / "c.yaml")],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {folder}"), proc.stderr
    shutil.rmtree(folder)


def test_entry_point_debug_shows_traceback() -> None:
    if not SIMKV.exists():
        pytest.skip("simkv entry point not installed")
    folder = _folder()
    (folder / "c.yaml").write_bytes(HOSTILE_CONFIGS[2])
    proc = subprocess.run(
        [str(SIMKV), "--debug", "validate", str(folder / "c.yaml")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "Traceback" in proc.stderr and "InputError" in proc.stderr
    shutil.rmtree(folder)


def test_frames_are_untouched_by_a_failed_rerun(run_dir: Path, tmp_path: Path) -> None:
    """A failed run into an existing run folder leaves its files as they were."""
    folder = tmp_path / "copy"
    shutil.copytree(run_dir, folder)
    before = _snapshot(folder)
    config = tmp_path / "bad.yaml"
    config.write_text(CONFIG.replace("block_size: 4", "block_size: -4"))
    assert_clean(["run", str(config), "--out", str(folder)], (str(config),), ok=False)
    assert _snapshot(folder) == before
    assert len(pd.read_parquet(folder / "requests.parquet")) == 3
