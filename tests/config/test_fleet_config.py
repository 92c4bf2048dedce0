"""The ``fleet:`` section: replica groups inherit or replace the engine sections, and bad
fleets are one located line each (simkv.config.fleet)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simkv.config.sim import SimConfig
from simkv.errors import InputError
from simkv.run import load_config

ROOT = Path(__file__).resolve().parents[2]

BASE = """\
name: f
workload: {kind: synthetic, num_requests: 10, arrival: {kind: poisson, rate: 5},
           prompt_tokens: {kind: fixed, value: 100}, output_tokens: {kind: fixed, value: 20}}
model: llama-2-7b
gpu: a100-80gb
"""


def _load(tmp_path: Path, fleet: str, top: str = "") -> object:
    path = tmp_path / "f.yaml"
    path.write_text(BASE + top + fleet)
    return load_config(path)


def _error(tmp_path: Path, fleet: str, top: str = "") -> list[str]:
    with pytest.raises(InputError) as err:
        _load(tmp_path, fleet, top)
    return [one.format() for one in (err.value, *err.value.also)]


def test_without_a_fleet_a_config_is_one_replica(tmp_path: Path) -> None:
    cfg = _load(tmp_path, "")
    assert cfg.fleet is None and cfg.group_configs() == [cfg]  # type: ignore[attr-defined]


def test_groups_inherit_and_replace_whole_sections(tmp_path: Path) -> None:
    fleet = """\
fleet:
  router: {kind: prefix_aware}
  replicas:
    - {count: 2}
    - {count: 1, gpu: h100-80gb, parallel: {tensor_parallel: 2}, scheduler: {kind: orca}}
"""
    cfg = _load(tmp_path, fleet, "kv_cache: {block_size: 32}\n")
    first, second = cfg.group_configs()  # type: ignore[attr-defined]
    assert cfg.fleet.num_replicas == 3  # type: ignore[attr-defined]
    assert first.gpu.name == "a100-80gb" and second.gpu.name == "h100-80gb"
    assert second.parallel.tensor_parallel == 2 and first.parallel.tensor_parallel == 1
    assert first.kv_cache.prefix_caching == "hash"  # vllm_v1's default
    # orca's group keeps the top-level KV section but its own caching default (none)
    assert second.kv_cache.block_size == 32 and second.kv_cache.prefix_caching == "none"
    assert first.fleet is None and second.fleet is None


def test_an_unknown_router_is_located(tmp_path: Path) -> None:
    lines = _error(tmp_path, "fleet:\n  router: {kind: roundrobin}\n  replicas: [{count: 1}]\n")
    assert len(lines) == 1 and "f.yaml:7 fleet.router.kind" in lines[0]
    assert "round_robin" in lines[0]


def test_a_zero_count_is_located(tmp_path: Path) -> None:
    lines = _error(tmp_path, "fleet:\n  replicas:\n    - {count: 2}\n    - {count: 0}\n")
    assert lines == [f"{tmp_path / 'f.yaml'}:9 fleet.replicas.1.count: "
                     "Input should be greater than or equal to 1"]  # fmt: skip


def test_no_groups_and_unknown_group_keys_are_refused(tmp_path: Path) -> None:
    assert "fleet.replicas" in _error(tmp_path, "fleet:\n  replicas: []\n")[0]
    lines = _error(tmp_path, "fleet:\n  replicas: [{count: 1, workload: {}}]\n")
    assert "fleet.replicas.0.workload: unknown key" in lines[0]


def test_a_group_breaking_a_rule_names_its_group(tmp_path: Path) -> None:
    fleet = "fleet:\n  replicas:\n    - {count: 1}\n    - {count: 1, scheduler: {kind: orca}}\n"
    lines = _error(tmp_path, fleet, "kv_cache: {prefix_caching: hash}\n")
    assert len(lines) == 1 and "group 1: kv_cache.prefix_caching needs scheduler" in lines[0]


def test_a_bad_fleet_is_exit_2_without_traceback(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from simkv.cli import app

    path = tmp_path / "f.yaml"
    path.write_text(BASE + "fleet:\n  router: {kind: nope}\n  replicas: [{count: 1}]\n")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_validate_sizes_every_group_and_blames_a_groups_own_section(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from simkv.cli import app

    path = tmp_path / "f.yaml"
    groups = "fleet:\n  replicas:\n    - {count: 2}\n    - {count: 1, kv_cache: {num_blocks: 600}}"
    path.write_text(BASE + "kv_cache: {num_blocks: 500}\n" + groups + "\n")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0
    lines = [line for line in result.output.splitlines() if line.startswith("# KV cache")]
    assert lines == [
        "# KV cache (replica group 0, 2 replicas): 500 blocks x 16 tokens = 8000 token slots; "
        "512 CPU swap blocks",
        "# KV cache (replica group 1, 1 replicas): 600 blocks x 16 tokens = 9600 token slots; "
        "512 CPU swap blocks",
    ]
    path.write_text(BASE + groups.replace("600", "2") + "\n")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert f"{path}:9 fleet.replicas.1.kv_cache: replica group 1: the KV cache holds 32 " in (
        result.output
    )


def test_set_indexes_a_replica_group(tmp_path: Path) -> None:
    """``--set fleet.replicas.1.count=3`` sets the second group's count; an index past the end
    and a whole list item are one line blamed on ``--set``."""
    fleet = "fleet: {replicas: [{count: 1}, {count: 2, gpu: h100-80gb}]}\n"
    path = tmp_path / "f.yaml"
    path.write_text(BASE + fleet)
    cfg = load_config(path, ["fleet.replicas.1.count=3"])
    assert [g.count for g in cfg.fleet.replicas] == [1, 3]  # type: ignore[union-attr]
    assert cfg.fleet.replicas[1].gpu is not None  # type: ignore[union-attr]
    with pytest.raises(InputError, match=r"fleet\.replicas\.2: the list has 2 items") as err:
        load_config(path, ["fleet.replicas.2.count=3"])
    assert err.value.file == "--set"
    with pytest.raises(InputError, match="set the list item's keys one by one"):
        load_config(path, ["fleet.replicas.0={count: 4}"])
    # a count that breaks the model is blamed on --set, not on the file
    with pytest.raises(InputError) as err:
        load_config(path, ["fleet.replicas.0.count=0"])
    assert err.value.format().startswith("--set")


SHIPPED = sorted(
    p.relative_to(ROOT).as_posix()
    for pattern in ("configs/*.yaml", "configs/paper/*.yaml", "configs/measured/*.yaml")
    for p in ROOT.glob(pattern)
)


@pytest.mark.parametrize("name", SHIPPED)
def test_a_dumped_config_reads_back_as_itself(name: str) -> None:
    """A sweep or search hands each run its config dumped (``model_dump``): read back, it must
    be the config ``simkv run`` runs (a fleet group's unset ``kv_cache`` dumped as null once
    read back as the defaults, not the top level's)."""
    cfg = load_config(ROOT / name, [])
    assert SimConfig.model_validate(cfg.model_dump(mode="json")) == cfg


def test_a_dumped_fleet_group_inherits_the_top_level_kv_cache() -> None:
    cfg = load_config(ROOT / "configs/quickstart.yaml",
                      ["kv_cache.num_blocks=2", "fleet.replicas=[{count: 1}]"])  # fmt: skip
    again = SimConfig.model_validate(cfg.model_dump(mode="json"))
    assert again.fleet is not None and again.fleet.replicas[0].kv_cache is None
    assert again == cfg
