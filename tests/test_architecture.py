"""docs/architecture.md against the code: the layers' import rules hold (statically, at any
depth of a file, and transitively, as what importing a module really loads), no import circles,
small files, and every module, file and dotted name the document mentions exists."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import architecture_rules as rules

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def test_no_import_circles() -> None:
    """No module imports itself through others (imports inside functions and under
    ``TYPE_CHECKING`` included: a lower layer that needs a type declares a Protocol)."""
    assert rules.circles(rules.graph()) == []


def test_every_import_runs_down_the_layers() -> None:
    """Each import in every file (at any depth of it) reaches its own package or a lower
    layer (``tests/architecture_rules.py``)."""
    upward = {
        module: sorted(name for name in names if not rules.allowed(module, name))
        for module, names in rules.graph().items()
    }
    assert {module: names for module, names in upward.items() if names} == {}


@pytest.mark.parametrize(("under", "forbidden"), rules.INSIDE)
def test_inside_a_package_data_flows_one_way(under: str, forbidden: tuple[str, ...]) -> None:
    broken = {
        module: sorted(n for n in names if n.startswith(forbidden) and n != module)
        for module, names in rules.graph().items()
        if module.startswith(under)
    }
    assert {module: names for module, names in broken.items() if names} == {}


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in rules.modules() if m != "simkv" and rules.package_of(m) is None]
    assert unplaced == []


PROBE = """
import importlib, json, sys
loaded = {}
for name in json.loads(sys.argv[1]):
    before = set(sys.modules)
    importlib.import_module(name)
    loaded[name] = sorted(m for m in set(sys.modules) - before if m.startswith("simkv"))
print(json.dumps(loaded))
"""


def _loads(names: list[str]) -> dict[str, list[str]]:
    """Module → the simkv modules importing it loaded first, in one fresh interpreter importing
    ``names`` in order (so a module is charged with what it loads that no earlier one did)."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(names)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "package", [p for layer in rules.LAYERS for p in layer if p != "simkv.__main__"]
)  # (importing simkv.__main__ runs the command line: its imports are checked statically)
def test_importing_a_package_loads_nothing_above_it(package: str) -> None:
    """What importing each module of ``package`` actually loads, transitively (a fresh
    interpreter's ``sys.modules``), stays in the package and the layers below it."""
    names = [m for m in rules.modules() if rules.package_of(m) == package]
    loaded = _loads(names)
    above = {
        module: [m for m in found if not rules.allowed(module, m)]
        for module, found in loaded.items()
    }
    assert {module: found for module, found in above.items() if found} == {}


LOAD_EVERY_CONFIG = """
import sys
from pathlib import Path
from simkv.config.sim import read_config
for path in sorted(Path("configs").rglob("*.yaml")):
    if path.parent.name not in ("sweeps", "capacity", "profiles"):
        read_config(path)
print(" ".join(sorted(m for m in sys.modules if m.startswith("simkv"))))
"""


def test_loading_a_config_stays_in_the_config_layer() -> None:
    """Reading and validating every shipped run config (measured runs' replays included) with
    the config layer's loader runs nothing above it: no measurement, workload or engine code."""
    done = subprocess.run([sys.executable, "-c", LOAD_EVERY_CONFIG], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
    loaded = done.stdout.split()
    assert "simkv.config.sim" in loaded
    assert [m for m in loaded if not rules.allowed("simkv.config.sim", m)] == []


def test_files_stay_small() -> None:
    """Every module of simkv is at most 350 lines (split before it grows)."""
    long = {name: n for name, path in rules.modules().items()
            if (n := len(path.read_text().splitlines())) > 350}  # fmt: skip
    assert long == {}


def test_only_the_engine_loop_imports_simpy() -> None:
    users = [
        module for module, path in rules.modules().items()
        if "simpy" in {n.split(".")[0] for n in _third_party(path)}
    ]  # fmt: skip
    assert users == ["simkv.engine.engine"]


def _third_party(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


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
    text = re.sub(r"```.*?```", "", DOC.read_text(), flags=re.S)  # the drawing: names only
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


def test_the_document_draws_the_layers_the_tests_check() -> None:
    """docs/architecture.md's drawing of the house, top row first, is ``LAYERS`` reversed."""
    block = re.search(r"```layers\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    rows = [re.split(r"\s{2,}", line.strip())[0] for line in block.group(1).splitlines()]
    drawn = [tuple(name.strip() for name in row.split("·")) for row in rows if row]
    assert drawn == list(reversed(rules.LAYERS))
