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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from simkv.config.base import Frozen, YamlDoc, load_yaml, validate
from simkv.config.limits import FolderName
from simkv.config.sim import SimConfig, dump_resolved
from simkv.errors import InputError
from simkv.sweep.digest import run_digest
from simkv.sweep.points import (
    VARIANT_AXIS,
    Base,
    Point,
    apply_point,
    leaves,
    load_base,
    locate,
    slug,
)

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
        for path in leaves(variant)
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


def _plan_run(
    spec: SweepSpec, doc: YamlDoc, base: Base, point: Point, files: tuple[Path, dict[str, str]]
) -> PlannedRun:
    data, lines = copy.deepcopy(base.data), dict(base.lines)
    apply_point(data, spec.variants, point, doc, lines)
    try:
        config = SimConfig.model_validate(data)
    except ValidationError as err:
        raise locate(err, data, base, lines, doc, point) from None
    text = dump_resolved(config)
    digest = run_digest(config, text, *files)
    run_id = f"{slug(point.values)}-{digest[:12]}".lstrip("-")
    return PlannedRun(run_id, dict(point.values), config, text, digest)


def load_sweep(path: str | Path) -> SweepPlan:
    """Read, validate and expand a sweep file; every error is an :class:`InputError`."""
    return plan_sweep(load_yaml(path), Path(path))


def plan_sweep(doc: YamlDoc, file: Path) -> SweepPlan:
    """Validate and expand a parsed sweep document (a file's, or a mapping's:
    :func:`simkv.config.base.mapping_doc`, whose ``base`` path is relative to its
    ``base_dir``); every error is an :class:`InputError`."""
    if not isinstance(doc.data, dict):
        raise InputError("a sweep file must be a mapping", file=doc.file or None, line=1)
    spec = validate(SweepSpec, doc)
    _check_keys(spec, doc)
    _check_zip(spec, doc)
    _check_values(spec, doc)
    base, base_dir = load_base(spec.base, spec.overrides, doc)
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
    return SweepPlan(spec, file, base_dir, axes, tuple(runs.values()))
