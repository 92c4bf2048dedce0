"""Summary values as text: one format per unit, so a printed summary reads as one table.

Counts (ints) get thousands separators (``19,366``); fractions (names ending in ``_frac``,
``_rate``, ``_usage``, ``_saving``) four decimals (``0.9123``); GiB three; every other float —
milliseconds, seconds, throughputs per second — two decimals with thousands separators
(``13,710.52``), as vLLM's benchmark prints its table. Missing values print as ``—``.
"""

from __future__ import annotations

FRACTION_SUFFIXES = ("_frac", "_rate", "_usage", "_saving")


def format_value(key: str, value: float | None) -> str:
    """``value`` of summary metric ``key`` as text (see the module docstring)."""
    if value is None:
        return "—"
    if isinstance(value, bool | int):
        return f"{int(value):,}"
    if key.endswith(FRACTION_SUFFIXES):
        return f"{value:.4f}"
    if key.endswith("_gib"):
        return f"{value:,.3f}"
    return f"{value:,.2f}"


def percentile_label(q: float) -> str:
    """vLLM's name of percentile ``q``: ``p99`` for 99.0, ``p99.9`` for 99.9."""
    return f"p{int(q)}" if int(q) == q else f"p{q:g}"
