"""No silent skip of the browser tests in CI: without Chromium, :func:`require_chromium` skips
a test, and fails it when the ``CI`` environment variable is set (``.ci/run`` sets it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report import chromium

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_chromium_skips_locally_and_fails_in_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chromium, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="install Debian's chromium"):
        chromium.require_chromium()
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="required when CI is set"):
        chromium.require_chromium()


def test_ci_runs_make_test_with_ci_set() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'export CI="${CI:-1}"' in script
    assert script.index("export CI=") < script.index("\nmake test")


def test_make_test_states_what_the_browser_tests_need() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "test: $(TESTSTAMP) browser" in makefile
    assert "apt-get install chromium" in makefile and "SKIPPED" in makefile
