"""The sweep file model and its expansion into validated runs.

A sweep file names a base run config (a path relative to the sweep file, or an inline mapping),
``overrides`` applied to it first, and up to three kinds of axes:

* ``variants``: named override sets, deep-merged into the base (one axis called ``variant``);
* ``grid``: key path → values, expanded as a cartesian product (last key varies fastest);
* ``zip``: key path → values of one common length, advanced together.

Expansion order is variants × grid × zip (an absent part contributes one empty point). Every run
is base + overrides + its point, validated once as a :class:`SimConfig`; a point that does not
validate is an :class:`InputError` located in the sweep file (or the base file when the bad key
comes from there). A run's id is ``<slug>-<12 hex of its digest>``, the digest being the sha256 of
the resolved config YAML and of the content of every file it names (each ``path``: trace, step
table, empirical lengths, measured run folder): equal inputs share the hash, so an id names
exactly one config and its files, and editing a trace gives new ids.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from simkv.config.base import Frozen, KeyPath, YamlDoc, error_from_validation, load_yaml, validate
from simkv.config.limits import FolderName
from simkv.config.sim import SimConfig, apply_overrides, dump_resolved
from simkv.errors import InputError
from simkv.sweep.digest import run_digest

VARIANT_AXIS = "variant"
KEY_PATTERN = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_0-9]\w*)*")
Values = Annotated[list[Any], Field(min_length=1)]


class SweepSpec(Frozen):
    """A sweep file as written. Key paths are dotted run-config paths (``kv_cache.block_size``)."""

    name: FolderName = Field(description="sweep (folder) name")
    base: str | dict[str, Any] = Field(
        description="run config path relative to the sweep file, or an inline run config"
    )
    overrides: list[str] = Field(default_factory=list, description="key.path=value, applied first")
    grid: dict[str, Values] = Field(default_factory=dict, description="cartesian axes")
    zipped: dict[str, Values] = Field(
        default_factory=dict, alias="zip", description="axes of equal length advanced together"
    )
    variants: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="named override sets, deep-merged into the base"
    )
    run_timeout_s: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="wall-clock limit per run, s (a run past it is recorded as failed: timeout)",
    )  # fmt: skip


@dataclass(frozen=True)
class Point:
    """One point of the expansion: axis → value, and axis → where that value is in the sweep."""

    values: dict[str, Any]
    origins: dict[str, KeyPath]


@dataclass(frozen=True)
class PlannedRun:
    """A validated run of the sweep. ``digest``: the full sha256 of ``config_yaml`` and of the
    files it names (:func:`run_digest`)."""

    run_id: str
    point: dict[str, Any]
    config: SimConfig
    config_yaml: str
    digest: str


@dataclass(frozen=True)
class SweepPlan:
    """A loaded sweep: its runs in expansion order; ``base_dir`` resolves the runs' paths."""

    spec: SweepSpec
    file: Path
    base_dir: Path
    axes: tuple[str, ...]
    runs: tuple[PlannedRun, ...]


def _check_keys(spec: SweepSpec, doc: YamlDoc) -> None:
    """Every key that a grid, zip or variant sets is a run-config key path."""
    paths = [(("grid", key), key) for key in spec.grid]
    paths += [(("zip", key), key) for key in spec.zipped]
    paths += [
        (("variants", name, *path), ".".join(path))
        for name, variant in spec.variants.items()
        for path in _leaves(variant)
    ]
    for where, key in paths:
        if not KEY_PATTERN.fullmatch(key):
            field = ".".join(str(part) for part in where)
            raise InputError(
                "expected a run config key path such as kv_cache.block_size",
                file=doc.file, line=doc.line_of(where), field=field,
            )  # fmt: skip


def _check_zip(spec: SweepSpec, doc: YamlDoc) -> None:
    """Zip lists share one length; no key is both a grid and a zip axis."""
    lengths = {key: len(values) for key, values in spec.zipped.items()}
    first = next(iter(lengths), None)
    for key, length in lengths.items():
        if first is not None and length != lengths[first]:
            raise InputError(
                f"zip lists must have equal lengths: {first} has {lengths[first]}, "
                f"{key} has {length}",
                file=doc.file, line=doc.line_of(("zip", key)), field=f"zip.{key}",
            )  # fmt: skip
        if key in spec.grid:
            raise InputError(
                "key is both a grid and a zip axis",
                file=doc.file, line=doc.line_of(("zip", key)), field=f"zip.{key}",
            )  # fmt: skip


def _check_values(spec: SweepSpec, doc: YamlDoc) -> None:
    """No axis value is null: a point needs a value to show and to chart (leave a key out of
    the axes to keep its default)."""
    for part, axes in (("grid", spec.grid), ("zip", spec.zipped)):
        for key, values in axes.items():
            for i, value in enumerate(values):
                if value is None:
                    raise InputError(
                        "null is not an axis value (leave the key out to keep its default)",
                        file=doc.file, line=doc.line_of((part, key, i)), field=f"{part}.{key}",
                    )  # fmt: skip


def expand(spec: SweepSpec) -> list[Point]:
    """All points, variants × grid × zip, in that nesting order (zip rows innermost)."""
    variants = [{VARIANT_AXIS: (name, ("variants", name))} for name in spec.variants] or [{}]
    grid_axes = [
        [(key, (value, ("grid", key, i))) for i, value in enumerate(values)]
        for key, values in spec.grid.items()
    ]
    grid = [dict(combo) for combo in itertools.product(*grid_axes)]
    rows = zip(*spec.zipped.values(), strict=True) if spec.zipped else iter([()])
    zipped = [
        {key: (value, ("zip", key, i)) for key, value in zip(spec.zipped, row, strict=True)}
        for i, row in enumerate(rows)
    ]
    points = []
    for parts in itertools.product(variants, grid, zipped):
        merged = {axis: pair for part in parts for axis, pair in part.items()}
        points.append(
            Point(
                values={axis: value for axis, (value, _) in merged.items()},
                origins={axis: origin for axis, (_, origin) in merged.items()},
            )
        )
    return points


def _leaves(mapping: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Key paths of every non-mapping value in a nested mapping (empty mappings set nothing)."""
    out: list[tuple[str, ...]] = []
    for key, value in mapping.items():
        path = (*prefix, str(key))
        out.extend(_leaves(value, path) if isinstance(value, dict) else [path])
    return out


def _set_path(data: dict[str, Any], keys: tuple[str, ...], value: Any) -> None:
    """Set a key path as ``--set`` does (a preset name becomes ``{preset: name}``)."""
    apply_overrides(YamlDoc(data, {}, ""), [".".join(keys) + "=null"])  # creates the path
    node = data
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = copy.deepcopy(value)


def _note(lines: dict[KeyPath, int], path: KeyPath, line: int | None) -> None:
    if line is not None:
        lines[path] = line


@dataclass(frozen=True)
class _Base:
    """The base mapping with overrides applied, its file (None if inline), and sweep lines."""

    data: dict[str, Any]
    doc: YamlDoc | None
    lines: dict[KeyPath, int]


def _load_base(spec: SweepSpec, doc: YamlDoc) -> tuple[_Base, Path]:
    """Base + overrides, and the directory that the runs' relative paths resolve against."""
    sweep_dir = Path(doc.file).parent
    lines: dict[KeyPath, int] = {}
    if isinstance(spec.base, dict):
        data, base_doc, base_dir = copy.deepcopy(spec.base), None, sweep_dir
        for path, line in doc.lines.items():
            if len(path) > 1 and path[0] == "base":
                lines[path[1:]] = line
    else:
        base_doc = load_yaml(sweep_dir / spec.base)
        if not isinstance(base_doc.data, dict):
            raise InputError("a run config must be a mapping", file=base_doc.file, line=1)
        data, base_dir = base_doc.data, Path(base_doc.file).parent
    for i, item in enumerate(spec.overrides):
        line = doc.line_of(("overrides", i))
        try:
            apply_overrides(YamlDoc(data, {}, doc.file), [item])
        except InputError as err:
            raise InputError(err.message, file=doc.file, line=line, field="overrides") from None
        _note(lines, tuple(item.partition("=")[0].split(".")), line)
    return _Base(data, base_doc, lines), base_dir


def _apply_point(data: dict[str, Any], spec: SweepSpec, point: Point, doc: YamlDoc,
                 lines: dict[KeyPath, int]) -> None:  # fmt: skip
    """Apply the point to ``data``; note each config path it sets with its sweep-file line."""
    for axis, value in point.values.items():
        origin = point.origins[axis]
        if axis != VARIANT_AXIS:
            path = tuple(axis.split("."))
            _set_path(data, path, value)
            _note(lines, path, doc.line_of(origin))
            continue
        variant = spec.variants[value]
        for path in _leaves(variant):
            node: Any = variant
            for key in path:
                node = node[key]
            _set_path(data, path, node)
            for cut in range(1, len(path) + 1):
                _note(lines, path[:cut], doc.line_of((*origin, *path[:cut])))


def slug(point: dict[str, Any], max_len: int = 60) -> str:
    """Readable folder prefix from axis values: ``bs16-recompute``, ``orca_max-mns64``.

    A string value (or a variant name) is shown as is; any other value follows the initials of
    the key's last part (``block_size`` → ``bs``). Unsafe characters become ``_``.
    """
    parts = []
    for axis, value in point.items():
        if axis == VARIANT_AXIS or isinstance(value, str):
            part = str(value)
        else:
            last = axis.split(".")[-1]
            short = "".join(word[:1] for word in last.split("_") if word) or last
            if isinstance(value, bool):
                shown = "_on" if value else "_off"
            else:
                shown = f"{value:g}" if isinstance(value, float) else json.dumps(value)
            part = short + shown
        parts.append(re.sub(r"[^A-Za-z0-9._]+", "_", part).strip("_.")[:24])
    return "-".join(part for part in parts if part)[:max_len].rstrip("-")


def _locate(err: ValidationError, data: dict[str, Any], base: _Base, lines: dict[KeyPath, int],
            doc: YamlDoc, point: Point) -> InputError:  # fmt: skip
    """Where a run's validation error was written: the sweep file if the sweep set the bad key,
    else the base file; an error about the whole config points at the point's first axis."""
    swept = error_from_validation(err, YamlDoc(data, lines, doc.file))
    file, line = swept.file, swept.line
    if line is None and swept.field is not None and base.doc is not None:
        located = error_from_validation(err, YamlDoc(data, base.doc.lines, base.doc.file))
        file, line = located.file, located.line
    elif line is None:
        origin = next(iter(point.origins.values()), None)
        line = doc.line_of(origin) if origin is not None else None
    name = slug(point.values) or "base"
    return InputError(f"run {name}: {swept.message}", file=file, line=line, field=swept.field)


def _plan_run(
    spec: SweepSpec, doc: YamlDoc, base: _Base, point: Point, files: tuple[Path, dict[str, str]]
) -> PlannedRun:
    data, lines = copy.deepcopy(base.data), dict(base.lines)
    _apply_point(data, spec, point, doc, lines)
    try:
        config = SimConfig.model_validate(data)
    except ValidationError as err:
        raise _locate(err, data, base, lines, doc, point) from None
    text = dump_resolved(config)
    digest = run_digest(config, text, *files)
    run_id = f"{slug(point.values)}-{digest[:12]}".lstrip("-")
    return PlannedRun(run_id, dict(point.values), config, text, digest)


def load_sweep(path: str | Path) -> SweepPlan:
    """Read, validate and expand a sweep file; every error is an :class:`InputError`."""
    doc = load_yaml(path)
    if not isinstance(doc.data, dict):
        raise InputError("a sweep file must be a mapping", file=doc.file, line=1)
    spec = validate(SweepSpec, doc)
    _check_keys(spec, doc)
    _check_zip(spec, doc)
    _check_values(spec, doc)
    base, base_dir = _load_base(spec, doc)
    runs: dict[str, PlannedRun] = {}
    files: tuple[Path, dict[str, str]] = (base_dir, {})
    for point in expand(spec):
        run = _plan_run(spec, doc, base, point, files)
        if run.run_id in runs:
            origin = list(point.origins.values())[-1]
            raise InputError(
                f"two points give the same run {run.run_id}",
                file=doc.file, line=doc.line_of(origin),
            )  # fmt: skip
        runs[run.run_id] = run
    axes = ((VARIANT_AXIS,) if spec.variants else ()) + tuple(spec.grid) + tuple(spec.zipped)
    return SweepPlan(spec, Path(path), base_dir, axes, tuple(runs.values()))
