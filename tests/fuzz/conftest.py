"""Prints how many hostile inputs of each category a run of the fuzz suite tried."""

from __future__ import annotations

import pytest

from tests.fuzz.hostile import CATEGORIES, TRIED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TRIED:
        return
    terminalreporter.section("hostile inputs tried, per category")
    for category in CATEGORIES:
        terminalreporter.write_line(f"{category:>26}: {TRIED[category]:,}")
    terminalreporter.write_line(f"{'total':>26}: {sum(TRIED.values()):,}")
