"""The cheapest fleet among priced options, and the Pareto set of the fleets found.

Pure arithmetic over one row per option (:class:`OptionRow`), filled from each option's
replica-count search: the fewest replicas meeting the SLOs at the target rate, the GPUs one
replica takes (its tensor-parallel degree) and the answer run's throughput and p99 latencies.
A fleet of ``replicas`` replicas costs ``replicas × tensor_parallel × price_per_gpu_hour`` per
hour; the cheapest is the least cost per hour (ties: fewer GPUs, then the earlier option).
A fleet is on the Pareto front when no other fleet is at least as good in every one of cost
(lower), request throughput (higher), p99 TTFT and p99 TPOT (lower) and better in one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OptionRow:
    """One option's answer. ``replicas`` is None when no count up to the search's maximum
    meets the SLOs (then the figures are None too); latencies in ms, throughput in
    requests/s, price per GPU-hour."""

    name: str
    price_per_gpu_hour: float
    tensor_parallel: int
    replicas: int | None
    request_throughput: float | None = None
    p99_ttft_ms: float | None = None
    p99_tpot_ms: float | None = None

    @property
    def gpus(self) -> int | None:
        """GPUs of the fleet: replicas × tensor-parallel degree."""
        return None if self.replicas is None else self.replicas * self.tensor_parallel

    @property
    def cost_per_hour(self) -> float | None:
        """The fleet's price per hour: GPUs × price per GPU-hour."""
        gpus = self.gpus
        return None if gpus is None else gpus * self.price_per_gpu_hour


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
