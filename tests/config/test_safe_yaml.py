"""Bounded YAML loading (simkv.config.safe_yaml) and located validation errors (base)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simkv.config.base import load_yaml, parse_yaml
from simkv.config.safe_yaml import MAX_DEPTH, MAX_NODES
from simkv.errors import InputError
from simkv.run import load_config

CONFIG = """\
name: tiny
workload:
  kind: synthetic
  num_requests: 5
  arrival: {kind: poisson, rate: 1}
  prompt_tokens: {kind: fixed, value: 10}
  output_tokens: {kind: fixed, value: 10}
model: llama-2-7b
gpu: a100-80gb
"""


def _error(text: str) -> InputError:
    with pytest.raises(InputError) as err:
        parse_yaml(text, "x.yaml")
    return err.value


def test_alias_bomb_is_refused_with_its_line() -> None:
    lines = ["a: &a [" + ",".join(["x"] * 10) + "]"]
    for i in range(1, 10):
        prev = "a" if i == 1 else f"b{i - 1}"
        lines.append(f"b{i}: &b{i} [" + ",".join([f"*{prev}"] * 10) + "]")
    err = _error("\n".join(lines))
    assert f"more than {MAX_NODES:,} values" in err.message
    assert err.line is not None


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    err = _error("x: " + "[" * 5000 + "]" * 5000)
    assert f"deeper than {MAX_DEPTH}" in err.message
    assert err.line == 1


def test_deep_nesting_through_aliases_is_refused() -> None:
    lines = ["a0: &a0 [1]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 100)]
    assert "deeper than" in _error("\n".join(lines)).message


def test_recursive_alias_is_refused() -> None:
    assert _error("a: &a [*a]\n").message == "recursive alias"


def test_duplicate_key_is_refused_at_its_line() -> None:
    err = _error("name: a\nseed: 1\nname: b\n")
    assert (err.line, err.message) == (3, "duplicate key 'name'")


def test_huge_integer_is_refused() -> None:
    err = _error("seed: " + "9" * 5000 + "\n")
    assert "more than 40 digits" in err.message


def test_anchors_within_limits_still_work() -> None:
    doc = parse_yaml("a: &a {x: 1}\nb: *a\n", "x.yaml")
    assert doc.data == {"a": {"x": 1}, "b": {"x": 1}}


def test_non_utf8_byte_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes(b"name: ok\nseed: 1\ngpu: caf\xe9\n")
    with pytest.raises(InputError) as err:
        load_yaml(path)
    assert err.value.line == 3
    assert "not UTF-8" in err.value.message


def _config_error(tmp_path: Path, text: str, overrides: list[str] | None = None) -> InputError:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_config(path, overrides or [])
    return err.value


def test_all_errors_at_once_sorted_by_line_with_did_you_mean(tmp_path: Path) -> None:
    text = CONFIG + "kv_cache:\n  block_sise: 16\n  swap_space_gib: .inf\nslo: {ttft_mz: 1}\n"
    lines = _config_error(tmp_path, text).lines()
    assert len(lines) == 3
    assert lines[0].endswith(":11 kv_cache.block_sise: unknown key (did you mean block_size?)")
    assert lines[1].endswith(":12 kv_cache.swap_space_gib: Input should be a finite number")
    assert "slo.ttft_mz: unknown key (did you mean ttft_ms?)" in lines[2]


def test_set_errors_are_blamed_on_set(tmp_path: Path) -> None:
    err = _config_error(tmp_path, CONFIG, ["kv_cache.blocksize=3", "workload.num_requests=4.5"])
    lines = sorted(err.lines())
    assert lines[0] == "--set kv_cache.blocksize: unknown key (did you mean block_size?)"
    assert lines[1].startswith("--set workload.num_requests: Input should be")


def test_cross_field_error_points_at_the_key_without_value_error_prefix(tmp_path: Path) -> None:
    text = CONFIG + "scheduler: {kind: orca}\nkv_cache:\n  prefix_caching: hash\n"
    err = _config_error(tmp_path, text)
    assert err.format().endswith(
        ":12 kv_cache.prefix_caching: needs scheduler vllm_v1 or shortest_first"
    )
    err = _config_error(tmp_path, CONFIG + "kv_cache:\n  num_blocks: 9\n  capacity_gib: 1\n")
    assert (err.line, err.field) == (11, "kv_cache.num_blocks")
    assert not err.message.startswith("Value error")


def test_boolean_is_not_an_integer(tmp_path: Path) -> None:
    err = _config_error(tmp_path, CONFIG.replace("num_requests: 5", "num_requests: true"))
    assert (err.line, err.field) == (4, "workload.num_requests")
    assert "boolean" in err.message


@pytest.mark.parametrize(
    ("overrides", "kind"),
    [(["scheduler.kind=orca"], "orca"), (["scheduler.kind=static"], "static")],
)
def test_switching_kind_of_absent_section_starts_from_its_defaults(
    tmp_path: Path, overrides: list[str], kind: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    assert load_config(path, overrides).scheduler.kind == kind


def test_switching_cost_model_kind_of_absent_section(tmp_path: Path) -> None:
    (tmp_path / "steps.csv").write_text("batch_size,prefill_tokens,decode_tokens,time_ms\n")
    err = _config_error(tmp_path, CONFIG, ["cost_model.kind=table"])
    assert err.field == "cost_model.path"  # the table's own required key, not a roofline key


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ("kv_cache.capacity_gib=.inf", "kv_cache.capacity_gib"),
        ("kv_cache.capacity_gib=5000", "kv_cache.capacity_gib"),
        ("kv_cache.swap_space_gib=.inf", "kv_cache.swap_space_gib"),
        ("parallel.tensor_parallel=1000000000", "parallel.tensor_parallel"),
        ("parallel.tensor_parallel=3", "parallel.tensor_parallel"),
        ("cost_model.step_overhead_ms=.inf", "cost_model.step_overhead_ms"),
        ("workload.arrival.rate=.inf", "workload.arrival.rate"),
        ("workload.prompt_tokens={kind: lognormal, mu: 800, sigma: 1}", "workload.prompt_tokens"),
        ("workload.prompt_tokens.value=1000000000000000000000000000000", "workload"),
        ("workload.num_requests=1000000000000", "workload.num_requests"),
        ("workload.priority={values: [0, 1], weights: [1, .inf]}", "workload.priority"),
        ("name=..", "name"),
        ("name=" + "a" * 300, "name"),
    ],
)
def test_numbers_and_names_out_of_range_are_set_errors(
    tmp_path: Path, item: str, field: str
) -> None:
    err = _config_error(tmp_path, CONFIG, [item])
    assert err.file == "--set"
    assert err.field is not None
    assert err.field.startswith(field)


def test_bad_kind_from_set_is_blamed_on_set_and_stays_one_line(tmp_path: Path) -> None:
    err = _config_error(tmp_path, CONFIG, ["workload.kind=\x1f\rx"])
    assert (err.file, err.field) == ("--set", "workload.kind")
    assert len(err.format().splitlines()) == 1


@pytest.mark.parametrize("value", ["9" * 5000, "[" * 3000 + "]" * 3000, "&a [*a]"])
def test_hostile_set_value_is_a_set_error(tmp_path: Path, value: str) -> None:
    err = _config_error(tmp_path, CONFIG, [f"seed={value}"])
    assert (err.file, err.field) == ("--set", "seed")


def test_gpu_memory_and_kv_blocks_are_bounded(tmp_path: Path) -> None:
    from simkv.run import kv_sizing

    err = _config_error(tmp_path, CONFIG, ["gpu.memory_bytes=100000000000000000000"])
    assert (err.file, err.field) == ("--set", "gpu.memory_bytes")
    path = tmp_path / "tiny-model.yaml"
    path.write_text(CONFIG)
    tiny_model = ["model.num_layers=1", "model.num_kv_heads=1", "model.num_attention_heads=1",
                  "model.head_dim=1", "kv_cache.block_size=1"]  # fmt: skip
    with pytest.raises(InputError, match="KV blocks per GPU, more than"):
        kv_sizing(load_config(path, tiny_model))
