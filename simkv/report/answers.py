"""Answers marked in a report's headline: the number a reader (or a test) can find.

A headline sentence is plain text; :func:`mark_answer` wraps the answer's number in it in
``<b data-answer="KEY">`` where ``KEY`` names the summary file's field that holds the answer
(``answer_rate`` in ``capacity.json``, ``answer_replicas``, ``knee`` of a rate sweep, a run's
``p99_ttft_ms`` or ``slo_pass`` in ``summary.json``), so the page states which number answers
and the browser tests compare it with the file.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from simkv.report.conventions import format_ms


def mark_answer(line: str | Markup, shown: str, key: str, after: str = "") -> Markup:
    """``line`` escaped (a ``Markup`` line kept as it is), its first whole-word occurrence of
    ``shown`` (right after ``after``, when given) wrapped in ``<b data-answer="key">``;
    unchanged but escaped when there is none."""
    text = str(escape(line))
    target = re.escape(str(escape(shown)))
    pattern = rf"({re.escape(str(escape(after)))})(?<![\w.,])({target})(?![\w]|[.,]\d)"
    marked = re.sub(pattern, lambda m: f'{m.group(1)}<b data-answer="{escape(key)}">'
                    f"{m.group(2)}</b>", text, count=1)  # fmt: skip
    return Markup(marked)


def marked_verdict(
    lines: list[tuple[bool | None, str]], summary: dict[str, object]
) -> list[tuple[bool | None, Markup]]:
    """A run's SLO verdict lines (:func:`simkv.report.verdict.verdict_lines`) with each
    objective's PASS/FAIL marked ``slo_<name>_pass`` and its judged percentile marked by its
    summary key (``p99_ttft_ms``)."""
    from simkv.metrics.slo import judged_metric

    q = float(summary.get("slo_percentile") or 99.0)  # type: ignore[arg-type]
    out = []
    for passed, line in lines:
        found = re.match(r"SLO (\w+) ≤", line)
        if passed is None or found is None:
            out.append((passed, Markup(escape(line))))
            continue
        name = found.group(1).lower()
        key = judged_metric(f"{name}_ms", q)
        marked = mark_answer(line, "PASS" if passed else "FAIL", f"slo_{name}_pass")
        value = summary.get(key)
        shown = format_ms(float(value) if isinstance(value, int | float) else None)
        out.append((passed, mark_answer(marked, shown, key)))
    return out
