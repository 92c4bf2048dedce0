"""Packaged hardware presets: one YAML file per model or GPU, file name = preset name.

``models/<name>.yaml`` holds a :class:`simkv.config.hardware.ModelSpec` mapping and
``gpus/<name>.yaml`` a :class:`simkv.config.hardware.GpuSpec` mapping, each with a ``source:``
line naming the public document its numbers come from, and optionally ``aliases:``, the names
measurement files use for it (a Hugging Face model id, a CUDA device name), which
:func:`find_preset` matches and :func:`read_preset` leaves out. This module only finds and reads the
files (through :mod:`importlib.resources`, so it works from a wheel); validation lives in
:mod:`simkv.config.hardware`.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any, Literal

import yaml

PresetKind = Literal["models", "gpus"]

_SUFFIX = ".yaml"


def _folder(kind: PresetKind) -> Traversable:
    return files(__name__).joinpath(kind)


def list_presets(kind: PresetKind) -> list[str]:
    """Sorted names of the packaged presets of ``kind`` (``"models"`` or ``"gpus"``)."""
    return sorted(
        entry.name.removesuffix(_SUFFIX)
        for entry in _folder(kind).iterdir()
        if entry.is_file() and entry.name.endswith(_SUFFIX)
    )


def read_preset(kind: PresetKind, name: str) -> dict[str, Any]:
    """The raw mapping stored for preset ``name``.

    Raises:
        ValueError: no preset of that name; the message lists the known ones, so a config error
            built from it tells the user what to write instead.
    """
    known_names = list_presets(kind)
    if name not in known_names:
        known = ", ".join(known_names)
        singular = kind.removesuffix("s")
        raise ValueError(f"unknown {singular} preset {name!r}; known presets: {known}")
    data = _raw(kind, name)
    data.pop("aliases", None)
    return data


def _raw(kind: PresetKind, name: str) -> dict[str, Any]:
    text = _folder(kind).joinpath(name + _SUFFIX).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{kind} preset {name!r} is not a mapping")
    return data


def _normal(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def find_preset(kind: PresetKind, name: str) -> str | None:
    """The preset whose name or one of whose ``aliases`` equals ``name`` (case, spaces and
    punctuation ignored), or None."""
    want = _normal(name)
    for preset in list_presets(kind):
        aliases = _raw(kind, preset).get("aliases") or []
        if want in {_normal(preset), *(_normal(str(alias)) for alias in aliases)}:
            return preset
    return None
