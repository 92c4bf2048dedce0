"""One expansion point of a sweep applied to its base config, and where its errors were written.

The base is the run config (a file, or a mapping inline in the sweep file) with the sweep's
``overrides`` applied; a point sets each axis's key path as ``--set`` would (a variant deep-merges
its mapping). Every config path a point sets is noted with its sweep-file line, so that a run's
validation error is located in the sweep file when the sweep set the bad key, else in the base.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simkv.config.base import KeyPath, YamlDoc, error_from_validation, load_yaml
from simkv.config.sim import apply_overrides
from simkv.errors import InputError

VARIANT_AXIS = "variant"


@dataclass(frozen=True)
class Point:
    """One point of the expansion: axis → value, and axis → where that value is in the sweep."""

    values: dict[str, Any]
    origins: dict[str, KeyPath]


def leaves(mapping: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Key paths of every non-mapping value in a nested mapping (empty mappings set nothing)."""
    out: list[tuple[str, ...]] = []
    for key, value in mapping.items():
        path = (*prefix, str(key))
        out.extend(leaves(value, path) if isinstance(value, dict) else [path])
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
class Base:
    """The base mapping with overrides applied, its file (None if inline), and sweep lines."""

    data: dict[str, Any]
    doc: YamlDoc | None
    lines: dict[KeyPath, int]


def load_base(base: str | dict[str, Any], overrides: list[str], doc: YamlDoc) -> tuple[Base, Path]:
    """The sweep's ``base`` (a run config file relative to the sweep file ``doc``, or a mapping
    inline) with its ``overrides``, and the directory the runs' relative paths resolve
    against."""
    sweep_dir = doc.base_dir
    lines: dict[KeyPath, int] = {}
    if isinstance(base, dict):
        data, base_doc, base_dir = copy.deepcopy(base), None, sweep_dir
        for path, line in doc.lines.items():
            if len(path) > 1 and path[0] == "base":
                lines[path[1:]] = line
    else:
        base_doc = load_yaml(sweep_dir / base)
        if not isinstance(base_doc.data, dict):
            raise InputError("a run config must be a mapping", file=base_doc.file, line=1)
        data, base_dir = base_doc.data, Path(base_doc.file).parent
    for i, item in enumerate(overrides):
        line = doc.line_of(("overrides", i))
        try:
            apply_overrides(YamlDoc(data, {}, doc.file), [item])
        except InputError as err:
            raise InputError(err.message, file=doc.file, line=line, field="overrides") from None
        _note(lines, tuple(item.partition("=")[0].split(".")), line)
    return Base(data, base_doc, lines), base_dir


def apply_point(data: dict[str, Any], variants: dict[str, dict[str, Any]], point: Point,
                doc: YamlDoc, lines: dict[KeyPath, int]) -> None:  # fmt: skip
    """Apply the point to ``data`` (a variant axis's value names one of the sweep's
    ``variants``); note each config path it sets with its sweep-file line."""
    for axis, value in point.values.items():
        origin = point.origins[axis]
        if axis != VARIANT_AXIS:
            path = tuple(axis.split("."))
            _set_path(data, path, value)
            _note(lines, path, doc.line_of(origin))
            continue
        variant = variants[value]
        for path in leaves(variant):
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


def locate(err: ValidationError, data: dict[str, Any], base: Base, lines: dict[KeyPath, int],
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
