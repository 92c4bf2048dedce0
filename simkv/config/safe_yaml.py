"""Bounded YAML loading: what a hostile file can make the loader do is limited.

:func:`load_bounded` parses text with PyYAML's safe loader and refuses, with the line:

* nesting deeper than :data:`MAX_DEPTH` levels (counted after aliases are expanded), so a
  5,000-deep list is an error, not a ``RecursionError``;
* documents that expand to more than :data:`MAX_NODES` nodes through aliases (billion laughs),
  and recursive aliases (``&a [*a]``);
* duplicate keys in a mapping (YAML says they are an error; PyYAML keeps the last);
* integers longer than :data:`MAX_INT_DIGITS` digits.

The text comes decoded (:func:`simkv.text.decode_utf8` names the line of the first byte that is
not UTF-8).
"""

from __future__ import annotations

from typing import Any

import yaml

from simkv.errors import InputError

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists (levels)."""
MAX_NODES = 100_000
"""Most nodes (scalars, mappings, lists) a document may have once its aliases are expanded."""
MAX_INT_DIGITS = 40
"""Most digits of an integer (2^128 has 39)."""


class _BoundedLoader(yaml.SafeLoader):
    """A safe loader whose composer stops at :data:`MAX_DEPTH` and whose ints are bounded."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(
                    None, None, f"nesting deeper than {MAX_DEPTH} levels", mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _bounded_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    digits = sum(ch.isalnum() for ch in str(node.value))
    if digits > MAX_INT_DIGITS:
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of more than {MAX_INT_DIGITS} digits", node.start_mark
        )
    return loader.construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _bounded_int)


def _error(message: str, node: yaml.Node, file: str) -> InputError:
    return InputError(message, file=file, line=node.start_mark.line + 1)


def _check_node(node: yaml.Node, level: int, memo: dict[int, tuple[int, int]], file: str) -> int:
    """Size of ``node`` once expanded (nodes); refuses depth, recursion and duplicate keys.

    ``memo`` maps a node's id to (size, height); an entry of (-1, 0) marks a node whose walk is
    under way, so meeting it again means a recursive alias. Recursion is at most MAX_DEPTH deep.
    """
    seen = memo.get(id(node))
    if seen is not None:
        if seen[0] < 0:
            raise _error("recursive alias", node, file)
        if level + seen[1] > MAX_DEPTH:
            raise _error(f"nesting deeper than {MAX_DEPTH} levels (through an alias)", node, file)
        return seen[0]
    if level > MAX_DEPTH:
        raise _error(f"nesting deeper than {MAX_DEPTH} levels (through an alias)", node, file)
    memo[id(node)] = (-1, 0)
    children: list[yaml.Node] = []
    if isinstance(node, yaml.MappingNode):
        keys: set[Any] = set()
        for key_node, value_node in node.value:
            key = getattr(key_node, "value", None)
            if isinstance(key_node, yaml.ScalarNode) and key != "<<":
                if key in keys:
                    raise _error(f"duplicate key {key!r}", key_node, file)
                keys.add(key)
            children += [key_node, value_node]
    elif isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    size, height = 1, 1
    for child in children:
        size += _check_node(child, level + 1, memo, file)
        height = max(height, 1 + memo[id(child)][1])
        if size > MAX_NODES:
            raise _error(f"more than {MAX_NODES:,} values once aliases are expanded", node, file)
    memo[id(node)] = (size, height)
    return size


def load_bounded(text: str, file: str) -> tuple[Any, yaml.Node | None]:
    """The data and the node tree of one YAML document, within the limits above.

    Raises ``yaml.MarkedYAMLError`` for syntax errors and :class:`InputError` for the limits.
    """
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_node(node, 1, {}, file)
        return loader.construct_document(node), node
    finally:
        loader.dispose()
