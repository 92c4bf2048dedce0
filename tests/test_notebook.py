"""The example notebook ``examples/quickstart.ipynb`` is valid nbformat 4 with its outputs
cleared, and its code cells run in order (plain execution in one namespace, in a temporary
working directory: no Jupyter needed) without raising."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT

NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def notebook() -> dict[str, object]:
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))


def code_cells(nb: dict[str, object]) -> list[str]:
    return ["".join(cell["source"]) for cell in nb["cells"] if cell["cell_type"] == "code"]


def test_the_notebook_is_nbformat_4_with_outputs_cleared() -> None:
    nb = notebook()
    assert nb["nbformat"] == 4 and nb["nbformat_minor"] >= 5
    ids = [cell["id"] for cell in nb["cells"]]
    assert len(set(ids)) == len(ids)
    for cell in nb["cells"]:
        assert cell["cell_type"] in ("markdown", "code") and isinstance(cell["source"], list)
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None


def test_the_notebook_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {"__name__": "__main__"}
    for i, source in enumerate(code_cells(notebook())):
        exec(compile(source, f"{NOTEBOOK.name} cell {i + 1}", "exec"), scope)
    assert {"run", "requests", "grid", "page"} <= set(scope)
    assert scope["page"] == Path("reports/quickstart-notebook/report.html")
    assert (tmp_path / "reports" / "quickstart-notebook" / "report.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports"]  # nothing else written
