"""Service-level objectives judged on a run: the one definition of "meets the SLOs".

A run *passes* an objective when the ``slo.percentile`` (default 99) of that latency is within
it (p99 TTFT ≤ ``slo.ttft_ms`` …), and *meets the SLOs* when it passes every objective its
``slo:`` section sets. A missing percentile (no finished request) fails. An objective's
*attainment* is the share of the completed requests whose own latency is within it (a request
with one output token has no TPOT and meets a TPOT objective); rejected and aborted requests are
not in it, but count as not good in ``request_goodput``. The *binding* objective is the one
with the highest percentile / limit ratio: the one failing worst, or, when all pass, the one
with the least headroom. Sweep reports (:mod:`simkv.report.sweep_summary`) and the capacity
search (:mod:`simkv.capacity`) judge with this.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from simkv.config.sections import SLOConfig
from simkv.metrics.text import percentile_label

SLO_KEYS: tuple[tuple[str, str, str], ...] = (
    ("ttft_ms", "p99_ttft_ms", "p99 TTFT"),
    ("tpot_ms", "p99_tpot_ms", "p99 TPOT"),
    ("e2el_ms", "p99_e2el_ms", "p99 E2EL"),
)
"""(``slo:`` key, the summary column judged against it at the default percentile, its name)."""


def slo_set(slo: SLOConfig) -> bool:
    """True when ``slo`` sets at least one objective."""
    return any(getattr(slo, key) is not None for key, _, _ in SLO_KEYS)


def judged_metric(key: str, percentile: float) -> str:
    """The summary key of ``slo.<key>``'s latency at ``percentile``: ``p99_ttft_ms``."""
    return f"{percentile_label(percentile)}_{key}"


def slo_name(key: str) -> str:
    """The objective's short name in summary keys and text: ``ttft`` for ``ttft_ms``."""
    return key.removesuffix("_ms")


def _ratio(summary: Mapping[str, object], key: str, slo: SLOConfig) -> float:
    """Percentile / limit of objective ``key`` (infinity when the percentile is missing)."""
    value = summary.get(judged_metric(key, slo.percentile))
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return float("inf")
    return float(value) / float(getattr(slo, key))


def meets_slos(summary: Mapping[str, object], slo: SLOConfig) -> bool:
    """Whether a run's ``summary`` meets every objective ``slo`` sets (False when none is)."""
    ratios = [_ratio(summary, key, slo) for key, _, _ in SLO_KEYS if getattr(slo, key)]
    return bool(ratios) and all(r <= 1.0 for r in ratios)


def slo_margins(summary: Mapping[str, object], slo: SLOConfig) -> dict[str, float | None]:
    """Per objective ``slo`` sets (by :func:`slo_name`): its margin, 1 − percentile / limit
    (the share of the limit left; negative when it fails, None when the percentile is
    missing). The binding objective has the least margin."""
    margins: dict[str, float | None] = {}
    for key, _, _ in SLO_KEYS:
        if getattr(slo, key) is not None:
            ratio = _ratio(summary, key, slo)
            margins[slo_name(key)] = 1.0 - ratio if np.isfinite(ratio) else None
    return margins


def binding(margins: Mapping[str, float | None]) -> str | None:
    """The binding objective of :func:`slo_margins`: the least margin, a missing percentile
    counting as the least of all (the first of equals, in ``SLO_KEYS`` order); None when no
    objective is set."""
    if not margins:
        return None
    return min(margins, key=lambda name: -np.inf if margins[name] is None else margins[name])


def verdict(
    summary: Mapping[str, object], latencies_ms: Mapping[str, np.ndarray], slo: SLOConfig
) -> dict[str, float | str | bool | None]:
    """The verdict's summary keys: ``slo_percentile``, per set objective ``slo_<name>_pass``
    and ``slo_<name>_attainment_frac``, then ``slo_pass``, ``slo_binding`` (the binding
    objective's name) and ``slo_binding_headroom_frac`` (1 - percentile / limit: negative when
    it fails). ``latencies_ms[key]``: each completed request's latency (NaN: meets it).
    Empty when no objective is set."""
    if not slo_set(slo):
        return {}
    out: dict[str, float | str | bool | None] = {"slo_percentile": slo.percentile}
    margins = slo_margins(summary, slo)
    for key, _, _ in SLO_KEYS:
        limit = getattr(slo, key)
        if limit is None:
            continue
        name, values = slo_name(key), latencies_ms[key]
        margin = margins[name]
        out[f"slo_{name}_pass"] = margin is not None and margin >= 0.0
        met = ~(values > limit)  # NaN compares False: a request without TPOT meets it
        out[f"slo_{name}_attainment_frac"] = float(met.mean()) if len(values) else None
    bound = binding(margins)
    out["slo_pass"] = all(m is not None and m >= 0.0 for m in margins.values())
    out["slo_binding"] = bound
    out["slo_binding_headroom_frac"] = margins[bound] if bound is not None else None
    return out


def good_fraction(summary: Mapping[str, object]) -> float | None:
    """Share of the run's requests that met every SLO (``request_goodput`` × duration /
    requests; rejected and aborted requests count as not good); None without goodput."""
    goodput, duration, count = (summary.get(k) for k in
                                ("request_goodput", "duration_s", "num_requests"))  # fmt: skip
    if not all(isinstance(v, int | float) for v in (goodput, duration, count)) or not count:
        return None
    return float(goodput) * float(duration) / float(count)  # type: ignore[arg-type]
