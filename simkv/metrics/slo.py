"""Service-level objectives judged on a run's summary: the one definition of "meets the SLOs".

A run *meets the SLOs* when, for every objective its ``slo:`` section sets, the p99 of that
latency is within it (p99 TTFT ≤ ``slo.ttft_ms`` …): at least 99 % of its requests meet each
objective. A missing p99 (no finished request) fails. Sweep reports (:mod:`simkv.report.
sweep_summary`) and the capacity search (:mod:`simkv.capacity`) both judge with this.
"""

from __future__ import annotations

from collections.abc import Mapping

from simkv.config.sections import SLOConfig

SLO_KEYS: tuple[tuple[str, str, str], ...] = (
    ("ttft_ms", "p99_ttft_ms", "p99 TTFT"),
    ("tpot_ms", "p99_tpot_ms", "p99 TPOT"),
    ("e2el_ms", "p99_e2el_ms", "p99 E2EL"),
)
"""(``slo:`` key, the summary column judged against it, its name in reports)."""


def slo_set(slo: SLOConfig) -> bool:
    """True when ``slo`` sets at least one objective."""
    return any(getattr(slo, key) is not None for key, _, _ in SLO_KEYS)


def meets_slos(summary: Mapping[str, object], slo: SLOConfig) -> bool:
    """Whether a run's ``summary`` meets every objective ``slo`` sets (False when none is)."""
    if not slo_set(slo):
        return False
    for key, metric, _ in SLO_KEYS:
        limit = getattr(slo, key)
        if limit is None:
            continue
        value = summary.get(metric)
        if not isinstance(value, int | float) or not value <= limit:
            return False
    return True


def good_fraction(summary: Mapping[str, object]) -> float | None:
    """Share of the run's requests that met every SLO (``request_goodput`` × duration /
    requests; rejected and aborted requests count as not good); None without goodput."""
    goodput, duration, count = (summary.get(k) for k in
                                ("request_goodput", "duration_s", "num_requests"))  # fmt: skip
    if not all(isinstance(v, int | float) for v in (goodput, duration, count)) or not count:
        return None
    return float(goodput) * float(duration) / float(count)  # type: ignore[arg-type]
