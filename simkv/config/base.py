"""Frozen config base model and YAML loading with line-numbered validation errors.

Every config model derives from :class:`Frozen` (unknown keys rejected, immutable). Loading goes
through :func:`load_yaml` so that a validation error names ``file:line key.path``.
"""

from __future__ import annotations

import copy
import difflib
import re
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from simkv.config.safe_yaml import load_bounded
from simkv.errors import InputError, all_of
from simkv.text import read_text

M = TypeVar("M", bound=BaseModel)
KeyPath = tuple[str | int, ...]


class Frozen(BaseModel):
    """Base of all config models: ``extra="forbid"``, frozen, validated once at the edge.

    Floats are finite (no ``.inf``/``.nan``), and a boolean is refused where the field does not
    take booleans (``true`` is not the integer 1).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_as_number(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, value in data.items():
                field = cls.model_fields.get(key) if isinstance(key, str) else None
                if isinstance(value, bool) and field and not _takes_bool(field.annotation):
                    raise ValueError(f"{key}: expected a number or a name, got a boolean")
        return data


def _takes_bool(annotation: Any) -> bool:
    """Whether a field annotation admits ``bool`` (or anything)."""
    if annotation is bool or annotation is Any:
        return True
    return any(_takes_bool(arg) for arg in get_args(annotation))


class YamlDoc:
    """A parsed YAML document plus the line (1-based) of every key and list item.

    ``set_paths`` holds the key paths that ``--set`` items wrote (see
    :func:`simkv.config.sim.apply_overrides`): an error there is blamed on ``--set``, not on a
    line of the file. Relative paths in the document resolve against ``base_dir``: the file's
    folder unless given (a mapping built in Python, :func:`mapping_doc`, has no file).
    """

    def __init__(
        self,
        data: Any,
        lines: dict[KeyPath, int],
        file: str,
        set_paths: set[KeyPath] | None = None,
        base_dir: Path | None = None,
    ) -> None:
        self.data = data
        self.lines = lines
        self.file = file
        self.set_paths = set_paths if set_paths is not None else set()
        self.base_dir = base_dir if base_dir is not None else Path(file).parent

    def line_of(self, path: KeyPath) -> int | None:
        """Line of ``path`` or of its nearest ancestor that has one."""
        for cut in range(len(path), -1, -1):
            line = self.lines.get(path[:cut])
            if line is not None:
                return line
        return None

    def error_at(self, path: KeyPath, message: str) -> InputError:
        """``message`` about the key at ``path``: blamed on ``--set`` if an override wrote it,
        else on this file at the key's line, naming the ``--set`` items that changed keys
        inside it (a whole-list rule broken by one item's override)."""
        field = ".".join(str(part) for part in path) or None
        if self.from_set(path):
            return InputError(message, file="--set", field=field)
        inside = sorted(".".join(map(str, key)) for key in self.set_paths
                        if key[: len(path)] == path and len(key) > len(path))  # fmt: skip
        if inside:  # the file's node, as --set changed it: name both
            message = f"{message} (with --set {', '.join(inside)})"
        return InputError(message, file=self.file, line=self.line_of(path), field=field)

    def from_set(self, path: KeyPath) -> bool:
        """Whether ``path`` was written by ``--set`` rather than by the file: a ``--set`` key path
        is a prefix of it, or shares a longer prefix with it than any key of the file does."""
        if any(path[: len(key)] == key for key in self.set_paths):
            return True
        in_file = max((cut for cut in range(len(path) + 1) if path[:cut] in self.lines), default=0)
        in_set = max((_common(path, key) for key in self.set_paths), default=0)
        return in_set > in_file


def _common(a: KeyPath, b: KeyPath) -> int:
    """Length of the common prefix of two key paths."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


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
    """Parse YAML text within :mod:`simkv.config.safe_yaml`'s limits; syntax errors and limits
    become :class:`InputError` with the line."""
    try:
        data, node = load_bounded(text, file)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        raise InputError(f"invalid YAML: {err.problem or err}", file=file, line=line) from None
    except yaml.reader.ReaderError as err:
        line = text[: err.position].count("\n") + 1
        raise InputError(f"invalid YAML: {err.reason}", file=file, line=line) from None
    except yaml.YAMLError as err:
        raise InputError(f"invalid YAML: {err}", file=file) from None
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _index_lines(node, (), lines)
    return YamlDoc({} if data is None else data, lines, file)


def mapping_doc(data: dict[str, Any], base_dir: Path, label: str = "") -> YamlDoc:
    """A document of a mapping built in Python (a deep copy: loading changes it in place), its
    relative paths resolved against ``base_dir``. It has no lines; its errors are labelled
    ``label`` (none by default: they name the key path alone)."""
    return YamlDoc(copy.deepcopy(data), {}, label, base_dir=base_dir)


def load_yaml(path: str | Path) -> YamlDoc:
    """Read and parse a YAML file; a missing, non-UTF-8 or too large (:mod:`simkv.text`) file
    is an :class:`InputError`."""
    return parse_yaml(read_text(Path(path)), str(path))


def _data_path(data: Any, loc: tuple[str | int, ...], keep_last: bool = True) -> KeyPath:
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
    if keep_last and loc and (not out or out[-1] != loc[-1]) and isinstance(loc[-1], str):
        out.append(loc[-1])
    return tuple(out)


def _keys_near(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model(s) at ``loc[:-1]`` below ``model`` (union tags followed)."""
    models = [model]
    for part in loc[:-1]:
        fields = [m.model_fields[part] for m in models if part in m.model_fields]
        if fields:
            models = [sub for f in fields for sub in _models_in(f.annotation)]
        else:  # a union tag pydantic inserted: keep the member whose kind it names
            tagged = [m for m in models if part in get_args(_kind_of(m))]
            models = tagged or models
    return sorted({name for m in models for name in m.model_fields})


def _kind_of(model: type[BaseModel]) -> Any:
    field = model.model_fields.get("kind")
    return field.annotation if field is not None else None


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in _models_in(arg)]


def _named_key(message: str, data: Any, path: KeyPath) -> tuple[KeyPath, str]:
    """The first key path that a model-level message names (``kv_cache.prefix_caching needs
    ...``) and that the data has below ``path`` (else ``path``), and the message without a
    leading ``key: ``."""
    node = data
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    for word in re.findall(r"[A-Za-z_][\w.]*\w", message):
        keys = tuple(int(key) if key.isdigit() else key for key in word.split("."))
        here = node
        for key in keys:  # (digits index lists: fleet.replicas.1.role)
            if isinstance(here, dict):
                here = here.get(key, _MISSING)
            elif isinstance(here, list) and isinstance(key, int) and key < len(here):
                here = here[key]
            else:
                here = _MISSING
        if here is not _MISSING:
            rest = message[len(word) :].lstrip(": ") if message.startswith(word) else message
            return (*path, *keys), rest
    return path, message


_MISSING = object()
_PREFIXES = ("Value error, ", "Assertion failed, ")


def one_error(item: Any, doc: YamlDoc, model: type[BaseModel] | None) -> InputError:
    """One pydantic error item (``loc``, ``type``, ``msg``) as a located :class:`InputError`."""
    loc = tuple(item["loc"])
    model_level = item["type"] in ("value_error", "assertion_error")
    path = _data_path(doc.data, loc, keep_last=not model_level)
    message = str(item["msg"])
    for prefix in _PREFIXES:
        message = message.removeprefix(prefix)
    if item["type"] == "extra_forbidden":
        message = "unknown key"
        near = _keys_near(model, loc) if model is not None else []
        close = difflib.get_close_matches(str(loc[-1]), near, n=1, cutoff=0.6)
        if close:
            message += f" (did you mean {close[0]}?)"
    elif model_level:
        path, message = _named_key(message, doc.data, path)
    elif item["type"] in ("union_tag_invalid", "union_tag_not_found"):
        tag = str(item.get("ctx", {}).get("discriminator", "")).strip("'")
        path = (*path, tag) if tag and (not path or path[-1] != tag) else path
    return doc.error_at(path, message)


def error_from_validation(
    err: ValidationError, doc: YamlDoc, model: type[BaseModel] | None = None
) -> InputError:
    """Every pydantic error as ``file:line key.path: message``, sorted by line (``--set`` ones
    last); the first is the error, the others its ``also``. ``model`` (the validated model)
    lets an unknown key suggest the closest known one."""
    return all_of([one_error(item, doc, model) for item in err.errors()])


def validate(model: type[M], doc: YamlDoc) -> M:
    """Validate a parsed document against ``model``; errors become :class:`InputError`."""
    try:
        return model.model_validate(doc.data)
    except ValidationError as err:
        raise error_from_validation(err, doc, model) from None
