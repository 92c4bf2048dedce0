"""The SLO verdict of a run as sentences, the same in the terminal and the HTML report: one per
objective (its limit, pass or fail at the judged percentile, the share of completed requests
meeting it), then which objective binds. Judged by :func:`simkv.metrics.slo.verdict`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simkv.metrics.slo import SLO_KEYS, judged_metric, slo_name
from simkv.metrics.text import percentile_label
from simkv.report.conventions import format_ms


def verdict_lines(
    summary: Mapping[str, Any], limits: Mapping[str, Any]
) -> list[tuple[bool | None, str]]:
    """``(passed, sentence)`` per set objective, then ``(None, binding sentence)``; ``limits``:
    the run's ``slo:`` section. Empty when no objective is set or the summary has no verdict."""
    if "slo_pass" not in summary:
        return []
    q = float(summary["slo_percentile"])
    label = percentile_label(q)
    lines: list[tuple[bool | None, str]] = []
    for key, _, _ in SLO_KEYS:
        name, limit = slo_name(key), limits.get(key)
        if limit is None or f"slo_{name}_pass" not in summary:
            continue
        passed = bool(summary[f"slo_{name}_pass"])
        value = summary.get(judged_metric(key, q))
        met = summary.get(f"slo_{name}_attainment_frac")
        lines.append((passed, f"SLO {name.upper()} ≤ {_ms(limit)}: {'PASS' if passed else 'FAIL'}"
                              f", {label} {_ms(value)}; {_percent(met)} of completed requests "
                              "met it"))  # fmt: skip
    lines.append((None, binding_line(summary)))
    return lines


def binding_line(summary: Mapping[str, Any]) -> str:
    """Which SLO binds and by how much (``slo_binding``, ``slo_binding_headroom_frac``)."""
    name, headroom = str(summary["slo_binding"]).upper(), summary.get("slo_binding_headroom_frac")
    label = percentile_label(float(summary["slo_percentile"]))
    if _missing(headroom):
        return f"Binding SLO: {name} ({label} missing: no request finished)"
    if headroom < 0:
        return f"Binding SLO: {name}, {label} {100 * -headroom:,.0f} % over its limit"
    return f"Binding SLO: {name}, {label} {100 * headroom:,.0f} % below its limit (headroom)"


def answer_lines(summary: Mapping[str, Any], where: str) -> list[str]:
    """``at 4.81 req/s: p99 TTFT 1,234 ms, p99 TPOT 80.1 ms, p99 E2EL …`` then the binding
    SLO's line: a search's run at its answer (``where``), from its summary (a sweep table row)."""
    q = 99.0 if _missing(summary.get("slo_percentile")) else float(summary["slo_percentile"])
    label = percentile_label(q)
    p99s = [f"{label} {slo_name(key).upper()} {_ms(summary.get(judged_metric(key, q)))}"
            for key, _, _ in SLO_KEYS]  # fmt: skip
    binding = [] if _missing(summary.get("slo_binding")) else [binding_line(summary)]
    return [f"at {where}: " + ", ".join(p99s), *binding]


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _ms(value: object) -> str:
    """``2,000 ms``, ``131 ms``, ``8.53 ms``, ``72.7 s`` (:func:`format_ms`); ``—`` when
    missing."""
    if not isinstance(value, int | float) or _missing(value):
        return "—"
    return format_ms(float(value))


def _percent(value: object) -> str:
    return f"{100 * value:.1f} %" if isinstance(value, int | float) else "—"
