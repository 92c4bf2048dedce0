"""Calibration profiles: a fitted roofline written as YAML, named by a run config.

A profile is a ``cost_model`` mapping (every :class:`~simkv.config.cost.RooflineCostConfig`
field, fitted or default) preceded by comments saying what it was fitted on, with which knobs,
and how well. A run config uses one with ``cost_model: {profile: path/to/profile.yaml}``; keys
beside ``profile`` override the profile's values (``cost_model: {profile: p.yaml,
step_overhead_ms: 3}``). The path is relative to the config file, and the expansion happens
when the config is loaded (:func:`expand_profile`), so ``config.resolved.yaml`` prints every
number the run used.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from simkv.config.base import YamlDoc, load_yaml, validate
from simkv.config.cost import RooflineCostConfig
from simkv.errors import InputError
from simkv.outputs import make_folder, write_file

__all__ = ["expand_profile", "read_profile", "write_profile"]


def write_profile(cfg: RooflineCostConfig, path: Path, header: list[str]) -> Path:
    """Write ``cfg`` as a profile at ``path``, each ``header`` line as a leading comment."""
    make_folder(path.parent)
    lines = [f"# {line}".rstrip() for line in header]
    body = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
    return write_file(path, "\n".join([*lines, body]))


def read_profile(path: Path) -> RooflineCostConfig:
    """A profile file as a validated roofline config (errors name the profile's file:line)."""
    doc = load_yaml(path)
    if not isinstance(doc.data, dict):
        raise InputError("a calibration profile must be a mapping", file=path, line=1)
    if doc.data.get("kind", "roofline") != "roofline":
        raise InputError(
            "a calibration profile is a roofline (kind: roofline)",
            file=path,
            line=doc.line_of(("kind",)),
            field="kind",
        )
    return validate(RooflineCostConfig, doc)


def expand_profile(doc: YamlDoc) -> None:
    """Replace ``cost_model: {profile: p, **overrides}`` in a run config document by the
    profile's mapping with the overrides on top (in place; nothing to do without ``profile``)."""
    section = doc.data.get("cost_model") if isinstance(doc.data, dict) else None
    if not isinstance(section, dict) or "profile" not in section:
        return
    name, key = section["profile"], ("cost_model", "profile")
    if not isinstance(name, str) or not name:
        raise doc.error_at(key, "expected the path of a calibration profile")
    path = doc.base_dir / name
    if not path.is_file():
        raise doc.error_at(key, f"no such profile: {path}")
    profile = read_profile(path).model_dump(mode="json")
    overrides = {key: value for key, value in section.items() if key != "profile"}
    doc.data["cost_model"] = {**profile, **overrides}
