"""How many requests a generated workload may ask for: one count or one duration, bounded."""

from __future__ import annotations

from simkv.config.distributions import ArrivalConfig
from simkv.config.limits import MAX_REQUESTS


def check_size(
    count: int | None, duration_s: float | None, arrival: ArrivalConfig, count_name: str
) -> None:
    """Exactly one of a count and a duration; a count needs arrivals that never stop; a
    duration expects at most :data:`MAX_REQUESTS` arrivals."""
    if (count is None) == (duration_s is None):
        raise ValueError(f"give exactly one of {count_name} and duration_s")
    if count is not None and arrival.ends_at_zero_rate:
        raise ValueError(f"with {count_name}, the arrival schedule must not end at rate 0")
    expected = arrival.expected_arrivals(duration_s) if duration_s is not None else 0.0
    if expected > MAX_REQUESTS:
        raise ValueError(
            f"duration_s: {duration_s:g} s at the arrival rate expects {expected:.3g} arrivals, "
            f"more than {MAX_REQUESTS:,} (simkv.config.limits.MAX_REQUESTS): shorten "
            "duration_s or lower the rate"
        )
