"""simkv's layers and the imports they allow, read from the code (the rules
``tests/test_architecture.py`` checks; ``docs/architecture.md`` draws them).

A module may import its own package and the packages of lower layers, never a sibling of its
own layer or anything above it; that holds for every import in the file (module level, inside a
function, under ``if TYPE_CHECKING:``), so what a module can load at any time stays below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LAYERS: list[tuple[str, ...]] = [  # lowest first; the packages of one layer are siblings
    ("simkv.errors", "simkv.progress"),
    ("simkv.text",),
    ("simkv.tables", "simkv.presets", "simkv.kv", "simkv.outputs"),
    ("simkv.config",),
    ("simkv.measured",),
    ("simkv.workload",),
    ("simkv.metrics",),
    ("simkv.engine", "simkv.analysis"),
    ("simkv.run",),
    ("simkv.calibrate", "simkv.report", "simkv.sweep"),
    ("simkv.capacity",),
    ("simkv.api",),
    ("simkv.cli",),
    ("simkv.__main__",),
]
"""``simkv`` itself (``simkv/__init__.py``: the KV core's names, ``simkv.simulate`` on first
use) is the front door above every layer."""

INSIDE: list[tuple[str, tuple[str, ...]]] = [  # (modules under, may not import anything under)
    # the request vocabulary sits below the memory, the schedulers and the engine loop
    (
        "simkv.engine.request",
        (
            "simkv.engine.memory",
            "simkv.engine.scheduler",
            "simkv.engine.lazy",
            "simkv.engine.engine",
            "simkv.engine.fleet",
        ),
    ),
    ("simkv.engine.step_work", ("simkv.engine.request", "simkv.engine.memory")),
    # PagedKV owns its parts; they get what they need as arguments, never the memory itself
    ("simkv.engine.memory.", ("simkv.engine.memory.paged",)),
]
"""Rules inside a package: a module under the first name imports nothing under the others
(the memory itself, ``simkv.engine.memory.paged``, is exempt from its own rule)."""


def module_name(path: Path) -> str:
    """``simkv/engine/engine.py`` → ``simkv.engine.engine``; a package's ``__init__.py`` → the
    package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every simkv module and its file."""
    return {module_name(path): path for path in sorted((ROOT / "simkv").rglob("*.py"))}


def package_of(module: str) -> str | None:
    """The layered package ``module`` belongs to (None for ``simkv`` itself)."""
    for layer in LAYERS:
        for package in layer:
            if module == package or module.startswith(package + "."):
                return package
    return None


def layer_of(package: str) -> int:
    """The index of ``package``'s layer in :data:`LAYERS`."""
    return next(k for k, layer in enumerate(LAYERS) if package in layer)


def allowed(importer: str, imported: str) -> bool:
    """Whether module ``importer`` may import (or load) module ``imported``."""
    mine, theirs = package_of(importer), package_of(imported)
    if mine is None or theirs is None:  # simkv's front door imports anything; all may load it
        return mine is None or imported == "simkv"
    return mine == theirs or layer_of(theirs) < layer_of(mine)


def imports(path: Path, known: set[str]) -> set[str]:
    """The simkv modules the file imports anywhere in it (``from pkg import submodule`` names
    the submodule, as ``from pkg.submodule import name`` does: a package's parent is loaded by
    either spelling and is not counted)."""
    here = module_name(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return {name for name in found if name in known and name != here}


def graph() -> dict[str, set[str]]:
    """simkv module → the simkv modules it imports."""
    files = modules()
    known = set(files)
    return {name: imports(path, known) for name, path in files.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``edges``: its strongly connected components of more than one
    module, each sorted (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found
