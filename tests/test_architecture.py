"""docs/architecture.md against the code: the import rules hold, and every module, file and
dotted name the document mentions exists."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def _imports() -> dict[str, set[str]]:
    """simkv module → the simkv modules (and simpy) it imports."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "simkv").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[module] = {n for n in names if n.startswith("simkv") or n == "simpy"}
    return found


RUN_AND_ABOVE = ("simkv.run", "simkv.fleet_run", "simkv.api", "simkv.calibrate", "simkv.report",
                 "simkv.sweep", "simkv.capacity", "simkv.analysis", "simkv.cli")  # fmt: skip
"""The run layer (``simkv.run`` also covers ``simkv.runner``) and what is built on it."""
ABOVE_WORKLOAD = ("simkv.engine", "simkv.metrics", *RUN_AND_ABOVE)
ABOVE_CONFIG = ("simkv.measured", "simkv.workload", *ABOVE_WORKLOAD)

RULES = [  # (modules under, may not import anything under)
    (
        "simkv.kv",
        ("simkv.engine", "simkv.workload", "simkv.metrics", "simkv.report", "simkv.sweep"),
    ),
    ("simkv.metrics", ("simkv.engine", *RUN_AND_ABOVE)),
    ("simkv.config", ("simkv.workload", *ABOVE_WORKLOAD)),
    ("simkv.measured", ("simkv.workload", *ABOVE_WORKLOAD)),  # it only reads
    ("simkv.workload", ABOVE_WORKLOAD),
    ("simkv.text", ("simkv.tables", "simkv.config", *ABOVE_CONFIG)),
    ("simkv.tables", ("simkv.config", *ABOVE_CONFIG)),
]


@pytest.mark.parametrize(("under", "forbidden"), RULES)
def test_data_flows_one_way(under: str, forbidden: tuple[str, ...]) -> None:
    broken = {
        module: sorted(n for n in names if n.startswith(forbidden))
        for module, names in _imports().items()
        if module.startswith(under)
    }
    assert not {m: n for m, n in broken.items() if n}


def test_only_the_engine_loop_imports_simpy() -> None:
    assert [m for m, names in _imports().items() if "simpy" in names] == ["simkv.engine.engine"]


def _resolve(dotted: str) -> bool:
    """Whether ``dotted`` (``simkv.`` optional) names a module or an attribute path in one."""
    parts = dotted.removeprefix("simkv.").split(".")
    for cut in range(len(parts), -1, -1):
        try:
            obj: object = importlib.import_module(".".join(["simkv", *parts[:cut]]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


def test_every_name_in_the_document_exists() -> None:
    text = DOC.read_text()
    spans = re.findall(r"`([^`]+)`", text)
    paths = [s for s in spans if s.startswith(("simkv/", "tests/", "docs/"))]
    missing = [p for p in paths if not (ROOT / p.split("::")[0].split(" ")[0]).exists()]
    assert not missing
    dotted = [
        s.split("(")[0] for s in spans
        if re.fullmatch(r"[a-z_]+(\.[A-Za-z_]+)+(\(.*\))?", s)
        and not s.endswith((".yaml", ".html", ".json", ".py"))
        and s.split(".")[0] in {"simkv", "engine", "metrics", "report", "runner", "config",
                                "workload", "registry", "kv"}
    ]  # fmt: skip
    assert len(dotted) > 10
    unresolved = [d for d in dotted if not _resolve(re.sub(r"^registry\.", "engine.registry.", d))]
    assert not unresolved
