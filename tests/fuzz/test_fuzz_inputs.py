"""Hostile inputs through the real CLI: configs, ``--set`` items, traces, outputs, run folders.

Every case must end with exit 0 (a value that happens to be valid) or exit 2 with only
``error: <place> ...`` lines (the place: the file, ``--set``, or the folder/file at fault), never
a traceback, and must not change anything already written. The tables run in CI; the
hypothesis searches run a few hundred examples in CI and many more under ``make fuzz``
(marker ``fuzz``).
"""

from __future__ import annotations

import re
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.hostile import CONFIG, assert_clean, folder, snapshot, tried

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


# --- configs: a table of hostile documents -------------------------------------------------

BOMB = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"b{i}: &b{i} [" + ",".join([f"*{'a' if i == 1 else f'b{i - 1}'}"] * 10) + "]\n"
    for i in range(1, 9)
)


POISSON_1E9 = "arrival: {kind: poisson, rate: 1e9}"


def _with(old: str, new: str) -> bytes:
    return CONFIG.replace(old, new).encode()


HOSTILE: list[tuple[str, bytes]] = [  # (category, the config file's bytes)
    ("YAML structure", BOMB.encode()),
    ("YAML structure", ("x: " + "[" * 5000 + "]" * 5000 + "\n").encode()),
    ("YAML documents and bytes", b"name: caf\xe9\n"),
    ("YAML documents and bytes", b"\xff\xfe\x00n\x00a\x00m\x00e"),
    ("YAML structure", CONFIG.encode() + b"name: twice\n"),
    ("numbers", ("seed: " + "9" * 5000 + "\n").encode()),
    ("YAML structure", b"a: &a [*a]\n"),
    ("YAML structure", b"- just\n- a list\n"),
    ("YAML structure", b"just a string\n"),
    ("YAML structure", b"name: [unclosed\n"),
    ("YAML structure", b"\t\tname: tabs\n"),
    ("YAML structure", b"name: !!python/object/apply:os.system [echo hi]\n"),
    ("strings and names", CONFIG.replace("name: fuzz", "name: ..").encode()),
    ("strings and names", CONFIG.replace("name: fuzz", "name: " + "a" * 300).encode()),
    ("numbers", CONFIG.replace("num_blocks: 40", "num_blocks: true").encode()),
    ("numbers", CONFIG.replace("num_blocks: 40", "num_blocks: .inf").encode()),
    ("numbers", CONFIG.replace("num_blocks: 40", "capacity_gib: .inf").encode()),
    ("numbers", CONFIG.replace("num_blocks: 40", "num_blocks: 40, swap_space_gib: .nan").encode()),
    ("strings and names", CONFIG.replace("block_size: 4", "block_sise: 4").encode()),
    ("numbers", CONFIG.replace("max_model_len: 64", "max_model_len: 1e30").encode()),
    ("numbers", CONFIG.replace("max_model_len: 64", "max_model_len: 100000000000000").encode()),
    ("strings and names", CONFIG.replace("kind: vllm_v1", "kind: orca, max_num_seqs: 4").encode()),
    ("strings and names", CONFIG.replace("kind: vllm_v1", "kind: nonsense").encode()),
    ("numbers", _with("gpu: a100-80gb", "gpu: {preset: a100-80gb, memory_gib: .inf}")),
    ("strings and names", _with("model: {preset", "model: {preset: no-such-model, x")),
    ("numbers", (CONFIG + "parallel: {tensor_parallel: 1000000000}\n").encode()),
    ("numbers", (CONFIG + "parallel: {tensor_parallel: 3}\n").encode()),
    ("numbers", (CONFIG + "cost_model: {step_overhead_ms: .inf}\n").encode()),
    ("strings and names", (CONFIG + "cost_model: {profile: nowhere.yaml}\n").encode()),
    ("numbers", (CONFIG + "slo: {ttft_ms: -1}\n").encode()),
    ("YAML documents and bytes", b""),
    ("numbers", _with("kind: trace", f"kind: synthetic, duration_s: 1e9, {POISSON_1E9}")),
    ("numbers", _with("kind: trace", "kind: synthetic, priority: {values: [1, 3000000000]}")),
]
HOSTILE_CONFIGS = [raw for _, raw in HOSTILE]

AT_RUN_TIME: list[bytes] = [  # valid configs naming files that are not there or not traces
    (CONFIG + "cost_model: {kind: table, path: nowhere.csv}\n").encode(),
    CONFIG.replace("path: trace.csv", "path: /dev/null").encode(),
    CONFIG.replace("path: trace.csv", "path: missing.csv").encode(),
    CONFIG.replace("path: trace.csv", "path: .").encode(),
    CONFIG.replace("path: trace.csv", "path: trace.csv\n  time_scale: 1e300").encode(),
]


@pytest.mark.parametrize("index", range(len(HOSTILE_CONFIGS)))
def test_hostile_config_is_one_error_per_problem(index: int) -> None:
    here = folder()
    category, raw = HOSTILE[index]
    (here / "c.yaml").write_bytes(raw)
    before = snapshot(here)
    assert_clean(["validate", str(here / "c.yaml")], (str(here),), category, ok=False)
    assert snapshot(here) == before
    shutil.rmtree(here)


@pytest.mark.parametrize(
    ("category", "raw"), [*HOSTILE[1:30:7], *(("traces", raw) for raw in AT_RUN_TIME)]
)
def test_hostile_config_runs_fail_without_output(category: str, raw: bytes) -> None:
    here = folder()
    (here / "c.yaml").write_bytes(raw)
    out = here / "out"
    places = (str(here), "/dev/null")
    assert_clean(["run", str(here / "c.yaml"), "--out", str(out)], places, category, ok=False)
    assert not out.exists()
    shutil.rmtree(here)


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
    "a..b", "bad key", "", "=", "workload.priority", "workload.duration_s",
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


_KEY = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_0-9]\w*)*")
_NUMBER = re.compile(
    r"[-+]?(\.?\d[\d_]*\.?\d*(e[-+]?\d+)?|\.inf|\.nan|0x[0-9a-f]+)|true|false|null"
)


def set_category(key: str, value: str) -> str:
    """What a ``--set key=value`` item tries: its syntax, a number, YAML structure or a name."""
    if not _KEY.fullmatch(key):
        return "--set syntax"
    if _NUMBER.fullmatch(value.strip().lower()):
        return "numbers"
    if value.lstrip()[:1] in ("[", "{", "&", "*", "!", "|", ">") or "\n" in value:
        return "YAML structure"
    return "strings and names"


def _check_set(items: list[tuple[str, str]]) -> None:
    here = folder()
    args = ["validate", str(here / "c.yaml")]
    for key, value in items:
        args += ["--set", f"{key}={value}"]
        tried(set_category(key, value))
    assert_clean(args, ("--set", str(here)), None)
    shutil.rmtree(here)


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
    here = folder()
    (here / "c.yaml").write_bytes(raw)
    args = ["validate", str(here / "c.yaml")]
    assert_clean(args, (str(here),), "YAML documents and bytes", ok=False)
    shutil.rmtree(here)


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
    here = folder()
    if jsonl:
        body = "".join('{"length": ' + (r if r else "null") + "}\n" for r in rows)
        trace = here / "t.jsonl"
    else:
        body = "length\n" + "".join(r + "\n" for r in rows)
        trace = here / "t.csv"
    trace.write_bytes(body.encode("latin-1", errors="replace"))
    args = ["waste", str(trace), "--out", str(here / "out"), "--replay-requests", "5"]
    assert_clean(args, (str(trace),), "traces")
    shutil.rmtree(here)


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
    here = folder()
    trace = here / "t.jsonl"
    trace.write_text('{"length": 4}\n{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    args = ["waste", str(trace), "--out", str(here / "o")]
    assert_clean(args, (f"{trace}:2",), "traces", ok=False)
    shutil.rmtree(here)


PRIORITY_CELLS = ["1e30", "-3000000000", "1.5", "nan", "", "true", "9" * 60, "high"]


@pytest.mark.parametrize("cell", PRIORITY_CELLS)
def test_hostile_trace_priorities(cell: str) -> None:
    here = folder()
    (here / "c.yaml").write_text(CONFIG.replace("{arrival_s: arrival_s}",
                                                "{arrival_s: arrival_s, priority: p}"))  # fmt: skip
    (here / "trace.csv").write_text(f"arrival_s,prompt_tokens,output_tokens,p\n0,10,5,{cell}\n")
    args = ["run", str(here / "c.yaml"), "--out", str(here / "o")]
    assert_clean(args, (f"{here / 'trace.csv'}:2 p:",), "traces", ok=False)
    assert not (here / "o").exists()
    shutil.rmtree(here)
