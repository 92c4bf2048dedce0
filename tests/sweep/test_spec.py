"""Sweep files: expansion order and points, errors located in the file, stable run ids."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simkv.errors import InputError
from simkv.sweep.spec import load_sweep, slug

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
SHIPPED = sorted((ROOT / "configs" / "sweeps").glob("*.yaml"))


def write_sweep(tmp_path: Path, body: str, name: str = "sweep.yaml") -> Path:
    """A sweep file on the quickstart base; ``body`` starts at line 3."""
    path = tmp_path / name
    path.write_text(f"name: t\nbase: {QUICKSTART}\n{body}")
    return path


def test_variants_grid_zip_product_in_nesting_order(tmp_path: Path) -> None:
    path = write_sweep(
        tmp_path,
        "overrides: [scheduler.kind=vllm_v0]\n"
        "variants:\n"
        "  wm1: {scheduler: {watermark: 0.01}}\n"
        "  wm5: {scheduler: {watermark: 0.05}}\n"
        "grid:\n"
        "  kv_cache.block_size: [8, 16]\n"
        "  preemption.mode: [recompute, swap]\n"
        "zip:\n"
        "  scheduler.max_num_seqs: [64, 128]\n"
        "  scheduler.max_num_batched_tokens: [4096, 8192]\n",  # ≥ max_model_len (vLLM 0.6)
    )
    plan = load_sweep(path)
    assert len(plan.runs) == 2 * 4 * 2
    assert plan.axes == (
        "variant", "kv_cache.block_size", "preemption.mode",
        "scheduler.max_num_seqs", "scheduler.max_num_batched_tokens",
    )  # fmt: skip
    points = [tuple(run.point.values()) for run in plan.runs]
    assert points[:5] == [
        ("wm1", 8, "recompute", 64, 4096),
        ("wm1", 8, "recompute", 128, 8192),
        ("wm1", 8, "swap", 64, 4096),
        ("wm1", 8, "swap", 128, 8192),
        ("wm1", 16, "recompute", 64, 4096),
    ]
    assert points[-1] == ("wm5", 16, "swap", 128, 8192)
    last = plan.runs[-1].config
    assert last.scheduler.kind == "vllm_v0"  # override kept under the variant's deep merge
    assert last.scheduler.watermark == 0.05
    assert (last.scheduler.max_num_seqs, last.scheduler.max_num_batched_tokens) == (128, 8192)
    assert (last.kv_cache.block_size, last.preemption.mode) == (16, "swap")
    assert last.workload.path.name == "AzureLLMInferenceTrace_conv.csv"  # the base is kept


def test_no_axes_is_one_run_of_the_base(tmp_path: Path) -> None:
    plan = load_sweep(write_sweep(tmp_path, "overrides: [workload.limit=7]\n"))
    assert len(plan.runs) == 1
    assert plan.runs[0].point == {}
    assert re.fullmatch(r"[0-9a-f]{12}", plan.runs[0].run_id)
    assert plan.runs[0].config.workload.limit == 7
    assert plan.base_dir == QUICKSTART.parent


def test_inline_base_resolves_paths_against_the_sweep_file(tmp_path: Path) -> None:
    path = tmp_path / "inline.yaml"
    path.write_text(
        "name: t\nbase:\n  workload: {kind: trace, path: x.csv}\n"
        "  model: llama-2-7b\n  gpu: a100-80gb\ngrid:\n  seed: [1, 2]\n"
    )
    plan = load_sweep(path)
    assert plan.base_dir == tmp_path
    assert [run.config.seed for run in plan.runs] == [1, 2]
    assert [run.run_id.split("-")[0] for run in plan.runs] == ["s1", "s2"]


def test_zip_length_mismatch_names_the_key_and_line(tmp_path: Path) -> None:
    path = write_sweep(
        tmp_path, "zip:\n  scheduler.max_num_seqs: [64, 128]\n  scheduler.policy: [fcfs]\n"
    )
    with pytest.raises(InputError) as err:
        load_sweep(path)
    assert (err.value.file, err.value.line, err.value.field) == (
        str(path),
        5,
        "zip.scheduler.policy",
    )
    assert err.value.message == (
        "zip lists must have equal lengths: scheduler.max_num_seqs has 2, scheduler.policy has 1"
    )


def test_bad_grid_value_is_reported_at_its_item(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, "grid:\n  kv_cache.block_size:\n    - 16\n    - 0\n")
    with pytest.raises(InputError) as err:
        load_sweep(path)
    assert (err.value.file, err.value.line, err.value.field) == (
        str(path),
        6,
        "kv_cache.block_size",
    )
    assert err.value.message == "run bs0: Input should be greater than or equal to 1"


def test_bad_variant_value_is_reported_at_its_key(tmp_path: Path) -> None:
    path = write_sweep(
        tmp_path,
        "variants:\n  ok: {}\n  bad:\n    scheduler:\n      kind: orca\n      reservation: maxx\n",
    )
    with pytest.raises(InputError) as err:
        load_sweep(path)
    assert (err.value.line, err.value.field) == (8, "scheduler.reservation")
    assert err.value.message.startswith("run bad: Input should be 'max', 'pow2' or 'oracle'")


def test_whole_config_rule_points_at_the_key_it_names(tmp_path: Path) -> None:
    # the quickstart runs vllm_v1, which cannot swap: the rule names preemption.mode
    path = write_sweep(tmp_path, "grid:\n  seed: [0]\n  preemption.mode: [recompute, swap]\n")
    with pytest.raises(InputError) as err:
        load_sweep(path)
    assert (err.value.file, err.value.line) == (str(path), 5)
    assert err.value.field == "preemption.mode"
    assert "run s0-swap: " in err.value.message
    assert "vllm_v1 preempts by recompute only" in err.value.message


def test_bad_key_of_the_base_file_is_reported_in_the_base_file(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(
        "workload: {kind: trace, path: x.csv}\nmodel: llama-2-7b\ngpu: a100-80gb\n"
        "kv_cache:\n  reuse: middle\n"
    )
    path = tmp_path / "sweep.yaml"
    path.write_text("name: t\nbase: base.yaml\ngrid:\n  seed: [1]\n")
    with pytest.raises(InputError) as err:
        load_sweep(path)
    assert (err.value.file, err.value.line, err.value.field) == (str(base), 5, "kv_cache.reuse")


@pytest.mark.parametrize(
    ("body", "line", "field"),
    [
        ("overrides: [nonsense]\n", 3, "overrides"),
        ("grid:\n  seed: []\n", 4, "grid.seed"),
        ("grid:\n  bad key: [1]\n", 4, "grid.bad key"),
        ("grid:\n  seed: [1]\nzip:\n  seed: [2]\n", 6, "zip.seed"),
        ("variants:\n  v:\n    kv-cache: {block_size: 8}\n", 5, "variants.v.kv-cache.block_size"),
        ("colour: blue\n", 3, "colour"),
    ],
)
def test_malformed_sweep_files(tmp_path: Path, body: str, line: int, field: str) -> None:
    with pytest.raises(InputError) as err:
        load_sweep(write_sweep(tmp_path, body))
    assert (err.value.line, err.value.field) == (line, field)


def test_same_config_same_id_different_config_different_id(tmp_path: Path) -> None:
    a = load_sweep(write_sweep(tmp_path, "grid:\n  kv_cache.block_size: [16, 32]\n", "a.yaml"))
    # a different sweep whose only run equals a's first (16 is the quickstart's block size)
    b = load_sweep(write_sweep(tmp_path, "overrides: [kv_cache.block_size=16]\n", "b.yaml"))
    again = load_sweep(write_sweep(tmp_path, "grid:\n  kv_cache.block_size: [16, 32]\n", "c.yaml"))
    ids = [run.run_id for run in a.runs]
    assert ids == [run.run_id for run in again.runs]
    assert re.fullmatch(r"bs16-[0-9a-f]{12}", ids[0])
    assert re.fullmatch(r"bs32-[0-9a-f]{12}", ids[1])
    assert ids[0][-12:] != ids[1][-12:]
    assert b.runs[0].run_id == ids[0][-12:]  # same config → same hash, whatever the slug
    assert a.runs[0].digest == b.runs[0].digest


def test_two_points_with_the_same_id_are_refused(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, "grid:\n  kv_cache.block_size: [16, 16]\n")
    with pytest.raises(InputError, match="two points give the same run bs16-"):
        load_sweep(path)


def test_slug() -> None:
    assert slug({"kv_cache.block_size": 16, "preemption.mode": "recompute"}) == "bs16-recompute"
    assert slug({"variant": "orca_max", "scheduler.max_num_seqs": 64}) == "orca_max-mns64"
    assert slug({"kv_cache.gpu_memory_utilization": 0.35}) == "gmu0.35"
    assert slug({"scheduler.enable_chunked_prefill": False}) == "ecp_off"
    assert slug({"workload.path": "../traces/a b.csv"}) == "traces_a_b.csv"
    assert slug({}) == ""


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_sweeps_load(path: Path) -> None:
    plan = load_sweep(path)
    expected = {"block_size_x_preemption": 8, "schedulers": 18, "gpu_memory": 10, "prefix_cache": 9,
                "rate": 10}  # fmt: skip
    assert len(plan.runs) == expected[path.stem]
    assert len({run.run_id for run in plan.runs}) == len(plan.runs)


@pytest.mark.parametrize("part", ["grid", "zip"])
def test_null_axis_value_is_a_located_error(tmp_path: Path, part: str) -> None:
    path = write_sweep(tmp_path, f"{part}:\n  kv_cache.num_blocks: [400, null]\n")
    with pytest.raises(InputError) as err:
        load_sweep(path)
    assert (err.value.line, err.value.field) == (4, f"{part}.kv_cache.num_blocks")
    assert "null is not an axis value" in err.value.message


def test_variant_switching_kind_starts_from_that_kinds_defaults(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(QUICKSTART.read_text().replace("scheduler:", "old_scheduler:", 1))
    text = base.read_text()
    if "old_scheduler:" in text:  # drop the section: the variant must start from orca's defaults
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("old_scheduler:"))
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()),
            len(lines),
        )
        base.write_text("\n".join(lines[:start] + lines[end:]) + "\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: t\nbase: {base}\nvariants:\n  orca: {{scheduler: {{kind: orca}}}}\n")
    plan = load_sweep(path)
    assert plan.runs[0].config.scheduler.kind == "orca"
