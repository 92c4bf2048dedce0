"""Frozen config base model and YAML loading with line-numbered validation errors.

Every config model derives from :class:`Frozen` (unknown keys rejected, immutable). Loading goes
through :func:`load_yaml` so that a validation error names ``file:line key.path``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from simkv.errors import InputError

M = TypeVar("M", bound=BaseModel)
KeyPath = tuple[str | int, ...]


class Frozen(BaseModel):
    """Base of all config models: ``extra="forbid"``, frozen, validated once at the edge."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class YamlDoc:
    """A parsed YAML document plus the line (1-based) of every key and list item."""

    def __init__(self, data: Any, lines: dict[KeyPath, int], file: str) -> None:
        self.data = data
        self.lines = lines
        self.file = file

    def line_of(self, path: KeyPath) -> int | None:
        """Line of ``path`` or of its nearest ancestor that has one."""
        for cut in range(len(path), -1, -1):
            line = self.lines.get(path[:cut])
            if line is not None:
                return line
        return None


def _index_lines(node: yaml.Node, path: KeyPath, out: dict[KeyPath, int]) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = (*path, key_node.value)
            out[key] = key_node.start_mark.line + 1
            _index_lines(value_node, key, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, (*path, i), out)


def parse_yaml(text: str, file: str) -> YamlDoc:
    """Parse YAML text; syntax errors become :class:`InputError` with the line."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        raise InputError(f"invalid YAML: {err.problem or err}", file=file, line=line) from None
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _index_lines(node, (), lines)
    return YamlDoc({} if data is None else data, lines, file)


def load_yaml(path: str | Path) -> YamlDoc:
    """Read and parse a YAML file; a missing file is an :class:`InputError`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", file=path) from None
    return parse_yaml(text, str(path))


def _data_path(data: Any, loc: tuple[str | int, ...]) -> KeyPath:
    """Drop pydantic's union-tag segments from ``loc`` so it matches the document's keys."""
    out: list[str | int] = []
    node = data
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if in_dict or in_list:
            out.append(part)
            node = node[part]
        elif isinstance(node, dict | list):
            continue  # a union tag or model name pydantic inserted
        else:
            out.append(part)
            node = None
    # a missing or unknown key that is not in the data is still the key the user must see
    if loc and (not out or out[-1] != loc[-1]) and isinstance(loc[-1], str):
        out.append(loc[-1])
    return tuple(out)


def error_from_validation(err: ValidationError, doc: YamlDoc) -> InputError:
    """The first pydantic error as ``file:line key.path: message``."""
    first = err.errors()[0]
    path = _data_path(doc.data, tuple(first["loc"]))
    field = ".".join(str(p) for p in path) or None
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    return InputError(message, file=doc.file, line=doc.line_of(path), field=field)


def validate(model: type[M], doc: YamlDoc) -> M:
    """Validate a parsed document against ``model``; errors become :class:`InputError`."""
    try:
        return model.model_validate(doc.data)
    except ValidationError as err:
        raise error_from_validation(err, doc) from None
