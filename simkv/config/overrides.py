"""``--set key.path=value`` items applied to a parsed config document.

Values are parsed by the bounded YAML loader (a value that is not YAML stays a string); a
section the document leaves out starts from its default ``kind``, so ``--set
scheduler.kind=orca`` starts the section from orca's defaults; the key paths written are noted
in ``doc.set_paths`` so that errors there are blamed on ``--set``. The document's model (whose
top-level fields are the sections) is an argument: :mod:`simkv.config.sim` applies these to a
run config (``apply_overrides``).
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from pydantic import BaseModel

from simkv.config.base import YamlDoc
from simkv.config.safe_yaml import load_bounded
from simkv.errors import InputError, all_of


def _parse_override(item: str) -> tuple[list[str], Any]:
    key, sep, raw = item.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_0-9][\w]*)*", key):
        raise InputError(f"expected key.path=value, got {item!r}", file="--set")
    try:
        value = load_bounded(raw, "--set")[0] if raw else ""
    except yaml.YAMLError:
        value = raw
    except InputError as err:  # beyond the loader's limits
        raise InputError(err.message, file="--set", field=key) from None
    return key.split("."), value


def _default_section(model: type[BaseModel], key: str) -> dict[str, Any]:
    """A top-level section of ``model`` the document leaves out, as ``--set`` starts it: its
    default ``kind`` only (the other defaults come from validation), so that switching the kind
    with ``--set scheduler.kind=orca`` starts from the new kind's defaults."""
    field = model.model_fields.get(key)
    default = getattr(field, "default", None)
    kind = getattr(default, "kind", None)
    return {"kind": kind} if isinstance(kind, str) else {}


def parent_of(data: dict[str, Any], keys: list[str], model: type[BaseModel]) -> dict[str, Any]:
    """The mapping that holds ``keys[-1]``, made along the way: a top-level section the
    document (of ``model``) leaves out starts from its default, a preset name becomes
    ``{preset: name}``, and a number indexes an existing list (``fleet.replicas.0.count``: the
    first group's count)."""
    node: Any = data
    for depth, key in enumerate(keys[:-1]):
        if isinstance(node, list):
            node = _list_item(node, key, keys[: depth + 1])
            continue
        if depth == 0 and key not in node:
            node[key] = _default_section(model, key)
        child = node.get(key)
        if isinstance(child, str):  # e.g. model: llama-2-7b  →  {preset: llama-2-7b}
            child = {"preset": child}
        indexed = isinstance(child, list) and keys[depth + 1].isdigit()
        if not (isinstance(child, dict) or indexed):
            child = {}
        node[key] = child
        node = child
    if isinstance(node, list):
        raise InputError(f"{'.'.join(keys)}: set the list item's keys one by one "
                         f"({'.'.join(keys)}.KEY=value)", file="--set")  # fmt: skip
    return node


def _list_item(items: list[Any], key: str, path: list[str]) -> dict[str, Any]:
    """``items[int(key)]`` as a mapping to set keys in; :class:`InputError` past the end."""
    index = int(key)
    if index >= len(items):
        raise InputError(f"{'.'.join(path)}: the list has {len(items)} items", file="--set")
    if not isinstance(items[index], dict):
        items[index] = {}
    item: dict[str, Any] = items[index]
    return item


def is_set(data: Any, keys: list[str]) -> bool:
    """Whether the document itself gives a value at ``keys``."""
    for key in keys:
        if not isinstance(data, dict) or data.get(key) is None:
            return False
        data = data[key]
    return True


def set_items(doc: YamlDoc, overrides: list[str], model: type[BaseModel]) -> None:
    """Apply ``--set key.path=value`` items (values parsed as YAML) to the document of
    ``model`` in place.

    A section the file leaves out starts from its default kind (``--set cost_model.x=1`` keeps
    the default ``kind``). The key paths set are noted in ``doc.set_paths`` (errors there are
    blamed on ``--set``).
    """
    errors = set_items_all(doc, overrides, model)
    if errors:
        raise all_of(errors)


def set_items_all(doc: YamlDoc, overrides: list[str], model: type[BaseModel]) -> list[InputError]:
    """:func:`set_items` that skips the items it cannot apply and returns their errors."""
    errors = []
    for item in overrides:
        try:
            keys, value = _parse_override(item)
        except InputError as err:
            errors.append(err)
            continue
        if isinstance(doc.data, dict):
            try:
                parent_of(doc.data, keys, model)[keys[-1]] = value
            except InputError as err:
                errors.append(err)
                continue
            doc.set_paths.add(tuple(int(k) if k.isdigit() else k for k in keys))
    return errors
