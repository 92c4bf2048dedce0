"""The cheapest fleet among priced options, and the Pareto set of the fleets found.

Pure arithmetic over one row per option (:class:`OptionRow`), filled from each option's
replica-count search: the fewest replicas meeting the SLOs at the target rate, the GPUs one
replica takes (its tensor-parallel degree) and the answer run's throughput and p99 latencies.
A fleet of ``replicas`` replicas costs ``replicas × tensor_parallel × price_per_gpu_hour`` per
hour; the cheapest is the least cost per hour (ties: fewer GPUs, then the earlier option).
A fleet is on the Pareto front when no other fleet is at least as good in every one of cost
(lower), request throughput (higher), p99 TTFT and p99 TPOT (lower) and better in one.

The planner's units at the answer (each None where its inputs are missing or zero), all from
the answer run's summary:

* cost per million output (total) tokens: ``cost_per_hour / (tokens/s × 3600) × 10⁶``, the
  tokens/s being ``output_throughput`` (``total_token_throughput``: prompt + output);
* requests/s per GPU (``request_throughput / gpus``) and per unit of cost per hour
  (``request_throughput / cost_per_hour``: req/s per $/h);
* utilisation: ``mfu_frac`` and the busiest replica's ``max_busy_frac``
  (:mod:`simkv.metrics.utilisation`);
* headroom: each SLO's margin (1 − percentile / limit, :func:`simkv.metrics.slo.slo_margins`;
  the least is the binding one's) and the busy-time headroom, 1 − ``max_busy_frac``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simkv.config.fleet_options import DEFAULT_CURRENCY
from simkv.metrics.slo import binding

TOKENS_PER_MILLION = 1e6
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class OptionRow:
    """One option's answer. ``replicas`` is None when no count up to the search's maximum
    meets the SLOs (then the figures are None too); latencies in ms, throughputs in
    requests/s and tokens/s, price per GPU-hour in ``currency`` (ISO 4217); ``slo_margins``:
    (objective, margin) per SLO set."""

    name: str
    price_per_gpu_hour: float
    tensor_parallel: int
    replicas: int | None
    request_throughput: float | None = None
    p99_ttft_ms: float | None = None
    p99_tpot_ms: float | None = None
    currency: str = DEFAULT_CURRENCY
    output_throughput: float | None = None
    total_token_throughput: float | None = None
    mfu_frac: float | None = None
    max_busy_frac: float | None = None
    slo_margins: tuple[tuple[str, float | None], ...] = ()

    @property
    def gpus(self) -> int | None:
        """GPUs of the fleet: replicas × tensor-parallel degree."""
        return None if self.replicas is None else self.replicas * self.tensor_parallel

    @property
    def cost_per_hour(self) -> float | None:
        """The fleet's price per hour: GPUs × price per GPU-hour."""
        gpus = self.gpus
        return None if gpus is None else gpus * self.price_per_gpu_hour

    @property
    def cost_per_m_output_tokens(self) -> float | None:
        """Cost of a million output tokens at the answer's output throughput."""
        return _per_million(self.cost_per_hour, self.output_throughput)

    @property
    def cost_per_m_total_tokens(self) -> float | None:
        """Cost of a million tokens, prompt and output, at the answer's total throughput."""
        return _per_million(self.cost_per_hour, self.total_token_throughput)

    @property
    def requests_per_gpu(self) -> float | None:
        """Requests/s each GPU of the fleet completes at the answer."""
        return _ratio(self.request_throughput, self.gpus)

    @property
    def requests_per_cost(self) -> float | None:
        """Requests/s per unit of cost per hour (req/s per $/h)."""
        return _ratio(self.request_throughput, self.cost_per_hour)

    @property
    def busy_headroom_frac(self) -> float | None:
        """1 − the busiest replica's busy share: the time its engine still idles."""
        return None if self.max_busy_frac is None else 1.0 - self.max_busy_frac

    @property
    def binding_slo(self) -> str | None:
        """The binding objective (:func:`simkv.metrics.slo.binding`), None without margins."""
        return binding(dict(self.slo_margins))


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _per_million(cost_per_hour: float | None, tokens_per_s: float | None) -> float | None:
    """``cost_per_hour / (tokens_per_s × 3600) × 10⁶``."""
    per_hour = None if tokens_per_s is None else tokens_per_s * SECONDS_PER_HOUR
    cost = _ratio(cost_per_hour, per_hour)
    return None if cost is None else cost * TOKENS_PER_MILLION


def cheapest(rows: list[OptionRow]) -> OptionRow | None:
    """The answered row of least cost per hour (ties: fewer GPUs, then the earlier row)."""
    answered = [(row.cost_per_hour, row.gpus, i, row) for i, row in enumerate(rows)
                if row.cost_per_hour is not None]  # fmt: skip
    return min(answered, key=lambda item: item[:3])[3] if answered else None


def _objectives(row: OptionRow) -> tuple[float, ...]:
    """Every objective as "lower is better" (a missing latency counts as infinitely bad)."""
    inf = float("inf")
    return (
        row.cost_per_hour if row.cost_per_hour is not None else inf,
        -(row.request_throughput or 0.0),
        row.p99_ttft_ms if row.p99_ttft_ms is not None else inf,
        row.p99_tpot_ms if row.p99_tpot_ms is not None else inf,
    )


def dominates(a: OptionRow, b: OptionRow) -> bool:
    """``a`` is at least as good as ``b`` in every objective and better in one."""
    ours, theirs = _objectives(a), _objectives(b)
    return all(x <= y for x, y in zip(ours, theirs, strict=True)) and ours != theirs


def pareto(rows: list[OptionRow]) -> list[bool]:
    """Per row, whether it is on the Pareto front of the answered rows (unanswered: False)."""
    answered = [row for row in rows if row.replicas is not None]
    return [row.replicas is not None and not any(dominates(o, row) for o in answered)
            for row in rows]  # fmt: skip


def row_record(row: OptionRow) -> dict[str, Any]:
    """A row as capacity.json stores it: the search's figures, then the planner's units."""
    return {
        "replicas": row.replicas, "tensor_parallel": row.tensor_parallel, "gpus": row.gpus,
        "price_per_gpu_hour": row.price_per_gpu_hour, "cost_per_hour": row.cost_per_hour,
        "request_throughput": row.request_throughput, "p99_ttft_ms": row.p99_ttft_ms,
        "p99_tpot_ms": row.p99_tpot_ms, "output_throughput": row.output_throughput,
        "total_token_throughput": row.total_token_throughput,
        "cost_per_m_output_tokens": row.cost_per_m_output_tokens,
        "cost_per_m_total_tokens": row.cost_per_m_total_tokens,
        "requests_per_gpu": row.requests_per_gpu, "requests_per_cost": row.requests_per_cost,
        "mfu_frac": row.mfu_frac, "max_busy_frac": row.max_busy_frac,
        "busy_headroom_frac": row.busy_headroom_frac,
        "slo_margins": dict(row.slo_margins), "binding_slo": row.binding_slo,
    }  # fmt: skip
