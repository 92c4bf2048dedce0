"""What a synthetic workload draws from: arrival processes, length distributions, request
priorities and think times, each a discriminated union on ``kind`` (or one model).

Every default lives here; :mod:`simkv.config.workload` assembles them into workloads, and
:mod:`simkv.workload.arrivals` and :mod:`simkv.workload.lengths` draw from them.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import Field, NonNegativeFloat, PositiveFloat, model_validator

from simkv.config.base import Frozen
from simkv.config.limits import (
    MAX_LOG_SIGMA,
    MAX_LOG_TOKENS,
    MAX_TOKENS,
    MAX_WEIGHT,
    Priority,
    Seconds,
    Tokens,
    TokensFloat,
)

__all__ = [
    "ArrivalConfig",
    "ConstantArrival",
    "EmpiricalLength",
    "ExponentialThink",
    "FixedLength",
    "FixedThink",
    "GammaArrival",
    "LengthConfig",
    "LognormalLength",
    "NormalLength",
    "PoissonArrival",
    "PriorityConfig",
    "ThinkTimeConfig",
    "UniformLength",
    "UniformThink",
    "ZipfLength",
]

SchedulePiece = tuple[NonNegativeFloat, NonNegativeFloat]


class _Rate(Frozen):
    """A constant ``rate`` or a piecewise-constant ``schedule`` (exactly one)."""

    rate: PositiveFloat | None = Field(None, description="mean arrival rate, requests/s")
    schedule: list[SchedulePiece] | None = Field(
        None,
        description="[[start_s, rate], ...]: rate (requests/s) from start_s (s) until the next "
        "start; the first start is 0 and the last rate holds forever",
    )

    @model_validator(mode="after")
    def _one_rate(self) -> Self:
        if (self.rate is None) == (self.schedule is None):
            raise ValueError("give exactly one of rate and schedule")
        if self.schedule is not None:
            starts = [start for start, _ in self.schedule]
            if not starts or starts[0] != 0:
                raise ValueError("schedule must start at 0 s")
            if any(b <= a for a, b in pairwise(starts)):
                raise ValueError("schedule start times must strictly increase")
            if not any(rate > 0 for _, rate in self.schedule):
                raise ValueError("schedule rates must not all be 0")
        return self

    @property
    def ends_at_zero_rate(self) -> bool:
        """True when the last schedule rate is 0 (no fixed number of arrivals is reachable)."""
        return self.schedule is not None and self.schedule[-1][1] == 0

    def expected_arrivals(self, duration_s: float) -> float:
        """Mean number of arrivals in [0, duration_s): ∫ rate (inf when it overflows)."""
        pieces = self.schedule if self.schedule is not None else [(0.0, self.rate or 0.0)]
        ends = [start for start, _ in pieces[1:]] + [duration_s]
        return sum(
            rate * (min(end, duration_s) - start)
            for (start, rate), end in zip(pieces, ends, strict=True)
            if start < duration_s
        )


class PoissonArrival(_Rate):
    """Poisson arrivals: exponential inter-arrival gaps."""

    kind: Literal["poisson"]


class GammaArrival(_Rate):
    """Gamma-renewal arrivals; ``cv`` > 1 is burstier than Poisson, cv = 1 is Poisson."""

    kind: Literal["gamma"]
    cv: PositiveFloat = Field(description="coefficient of variation of inter-arrival gaps")


class ConstantArrival(_Rate):
    """Evenly spaced arrivals (one every 1/rate s, first at 1/rate s)."""

    kind: Literal["constant"]


ArrivalConfig = Annotated[
    PoissonArrival | GammaArrival | ConstantArrival, Field(discriminator="kind")
]


def _check_order(low: float, high: float, low_name: str, high_name: str) -> None:
    """ValueError unless ``low <= high`` (a range's bounds)."""
    if high < low:
        raise ValueError(f"{high_name} ({high}) must be ≥ {low_name} ({low})")


class _Clip(Frozen):
    """Optional clipping of sampled lengths to ``[min, max]`` tokens (results are always ≥ 1)."""

    min: Tokens | None = Field(None, description="lower clip, tokens")
    max: Tokens | None = Field(None, description="upper clip, tokens")

    @model_validator(mode="after")
    def _ordered_clip(self) -> Self:
        if self.min is not None and self.max is not None:
            _check_order(self.min, self.max, "min", "max")
        return self


class FixedLength(_Clip):
    kind: Literal["fixed"]
    value: Tokens = Field(description="length of every request, tokens")


class UniformLength(_Clip):
    kind: Literal["uniform"]
    low: Tokens = Field(description="smallest length, tokens (included)")
    high: Tokens = Field(description="largest length, tokens (included)")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        _check_order(self.low, self.high, "low", "high")
        return self


class NormalLength(_Clip):
    kind: Literal["normal"]
    mean: TokensFloat = Field(description="mean length, tokens (draws rounded, ≥ 1)")
    std: NonNegativeFloat = Field(le=MAX_TOKENS, description="standard deviation, tokens")


class LognormalLength(_Clip):
    """Lognormal lengths given either (``mean``, ``median``) in tokens or (``mu``, ``sigma``)."""

    kind: Literal["lognormal"]
    mean: TokensFloat | None = Field(None, description="mean length, tokens")
    median: TokensFloat | None = Field(None, description="median length, tokens")
    mu: float | None = Field(None, le=MAX_LOG_TOKENS, description="mean of log(length), ≤ ln(2^31)")
    sigma: NonNegativeFloat | None = Field(
        None, le=MAX_LOG_SIGMA, description=f"std of log(length), ≤ {MAX_LOG_SIGMA:g}"
    )

    @model_validator(mode="after")
    def _one_pair(self) -> Self:
        moments = self.mean is not None and self.median is not None
        logs = self.mu is not None and self.sigma is not None
        given = sum(v is not None for v in (self.mean, self.median, self.mu, self.sigma))
        if given != 2 or not (moments or logs):
            raise ValueError("give exactly one pair: (mean, median) or (mu, sigma)")
        if moments and self.mean < self.median:  # type: ignore[operator]
            raise ValueError("lognormal mean must be ≥ median")
        return self


class ZipfLength(_Clip):
    """Bounded Zipf: P(k) ∝ k^(-a) for integer lengths ``low ≤ k ≤ high``."""

    kind: Literal["zipf"]
    a: PositiveFloat = Field(description="exponent (any value > 0, bounded support)")
    low: Tokens = Field(1, description="smallest length, tokens")
    high: Tokens = Field(description="largest length, tokens (≤ low + 10^7 - 1)")

    @model_validator(mode="after")
    def _support(self) -> Self:
        if not 0 <= self.high - self.low < 10_000_000:
            raise ValueError("zipf needs low ≤ high and at most 10^7 values in [low, high]")
        return self


class EmpiricalLength(_Clip):
    """Lengths drawn with replacement from one column of a CSV/JSONL file."""

    kind: Literal["empirical"]
    path: Path = Field(description="CSV/JSONL file; relative to the config file's directory")
    column: str = Field(description="column (CSV) or key (JSONL) holding lengths, tokens ≥ 1")


LengthConfig = Annotated[
    FixedLength | UniformLength | NormalLength | LognormalLength | ZipfLength | EmpiricalLength,
    Field(discriminator="kind"),
]


class PriorityConfig(Frozen):
    """Request priorities drawn from ``values`` (lower = more important)."""

    values: list[Priority] = Field(min_length=1, description="possible priorities")
    weights: list[Annotated[float, Field(ge=0, le=MAX_WEIGHT)]] | None = Field(
        None,
        description=f"relative probability of each value, 0..{MAX_WEIGHT:g} (their sum stays "
        "finite); None = equally likely",
    )

    @model_validator(mode="after")
    def _weights_match(self) -> Self:
        if self.weights is not None:
            if len(self.weights) != len(self.values):
                raise ValueError("weights must have one entry per value")
            if sum(self.weights) <= 0:
                raise ValueError("weights must not all be 0")
        return self


class FixedThink(Frozen):
    kind: Literal["fixed"]
    value_s: Seconds = Field(description="every think time, s")


class ExponentialThink(Frozen):
    kind: Literal["exponential"]
    mean_s: Seconds = Field(gt=0, description="mean think time, s")


class UniformThink(Frozen):
    kind: Literal["uniform"]
    low_s: Seconds = Field(description="shortest think time, s (included)")
    high_s: Seconds = Field(description="longest think time, s")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        _check_order(self.low_s, self.high_s, "low_s", "high_s")
        return self


ThinkTimeConfig = Annotated[
    FixedThink | ExponentialThink | UniformThink, Field(discriminator="kind")
]
