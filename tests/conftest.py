"""Shared fixtures: tiny hand-checkable runs and the optional shared traces folder."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def shared_traces() -> Path:
    """``../shared/traces`` when present (tests using it skip on machines without it)."""
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces not available")
    return SHARED_TRACES
