"""Workload configuration: synthetic generators or a trace file, chosen by ``kind``.

Kinds: ``synthetic`` (independent requests), ``shared_prefix`` (shared system prompts),
``multi_turn`` (closed-loop chat sessions), ``trace`` and ``measured`` (a real engine's measured
run, :mod:`simkv.config.measured`).

Arrival processes, length distributions and the workload itself are discriminated unions on
``kind``; every default lives here. Relative paths are resolved against the config file's
directory when the workload is built (:func:`simkv.workload.build.build_workload`).
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from simkv.config.base import Frozen
from simkv.config.limits import (
    MAX_LOG_SIGMA,
    MAX_LOG_TOKENS,
    MAX_REQUESTS,
    MAX_TOKENS,
    Priority,
    RequestCount,
    Seconds,
    Tokens,
    TokensFloat,
)
from simkv.config.measured import MeasuredWorkload
from simkv.config.policy import traits_of

__all__ = [
    "ArrivalConfig",
    "BeamSampling",
    "ConstantArrival",
    "EmpiricalLength",
    "ExponentialThink",
    "FixedLength",
    "FixedThink",
    "GammaArrival",
    "LengthConfig",
    "LognormalLength",
    "MeasuredWorkload",
    "MultiTurnWorkload",
    "NormalLength",
    "ParallelSampling",
    "PoissonArrival",
    "PriorityConfig",
    "SamplingConfig",
    "SharedPrefixWorkload",
    "SyntheticWorkload",
    "ThinkTimeConfig",
    "TraceColumns",
    "TraceWorkload",
    "UniformLength",
    "UniformThink",
    "WorkloadConfig",
    "ZipfLength",
    "check_sampling_scheduler",
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
    weights: list[NonNegativeFloat] | None = Field(
        None, description="relative probability of each value; None = equally likely"
    )

    @model_validator(mode="after")
    def _weights_match(self) -> Self:
        if self.weights is not None:
            if len(self.weights) != len(self.values):
                raise ValueError("weights must have one entry per value")
            if sum(self.weights) <= 0:
                raise ValueError("weights must not all be 0")
        return self


def _check_size(
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


class ParallelSampling(Frozen):
    """Every request generates ``n`` sequences (vLLM's ``SamplingParams.n``).

    ``fork_after_tokens > 0`` is a tree of thought: one parent sequence generates that many
    output tokens, then forks into ``n`` children, each generating the request's remaining
    output. A request whose output is not longer than ``fork_after_tokens`` never forks.
    """

    kind: Literal["parallel"]
    n: PositiveInt = Field(description="sequences per request after the fork")
    fork_after_tokens: NonNegativeInt = Field(
        0, description="output tokens the parent generates before forking (0 = at the prompt)"
    )


class BeamSampling(Frozen):
    """Beam search: ``width`` beams after the prompt; after every decode step each new beam picks
    a parent beam (drawn with the run's Generator), unpicked beams are freed."""

    kind: Literal["beam"]
    width: PositiveInt = Field(description="beams per request")


SamplingConfig = Annotated[ParallelSampling | BeamSampling, Field(discriminator="kind")]
_SAMPLING_DESCRIPTION = "multi-sequence requests (scheduler vllm_v0 only); None = one sequence"


def check_sampling_scheduler(workload: object, scheduler_kind: str) -> None:
    """Raise ValueError when ``workload`` has ``sampling`` and the scheduler cannot run
    multi-sequence requests (its traits' ``multi_sequence``: only vllm_v0).

    vLLM 0.11 (V1) fans ``n`` out into separate requests at the API layer, so its scheduler
    never sees a multi-sequence group; simkv models groups only for vLLM 0.6 (``vllm_v0``).
    """
    traits = traits_of(scheduler_kind)
    if getattr(workload, "sampling", None) is not None and not (traits and traits.multi_sequence):
        raise ValueError(
            f"workload.sampling needs scheduler vllm_v0, not {scheduler_kind}: vLLM 0.11 fans n "
            "out into separate requests and has no beam search; orca and static have no "
            "sequence groups"
        )


class SyntheticWorkload(Frozen):
    """Generated requests: arrivals from a process, lengths from distributions."""

    kind: Literal["synthetic"]
    num_requests: RequestCount | None = Field(None, description="number of requests, ≤ 10^7")
    duration_s: PositiveFloat | None = Field(None, description="all arrivals before this, s")
    arrival: ArrivalConfig
    prompt_tokens: LengthConfig
    output_tokens: LengthConfig
    priority: PriorityConfig | None = Field(None, description="None = every priority is 0")
    sampling: SamplingConfig | None = Field(None, description=_SAMPLING_DESCRIPTION)

    @model_validator(mode="after")
    def _one_size(self) -> Self:
        _check_size(self.num_requests, self.duration_s, self.arrival, "num_requests")
        return self


class SharedPrefixWorkload(Frozen):
    """Requests that open with one of ``num_prefixes`` shared prefixes, then a unique suffix.

    Prefix lengths are drawn once per prefix; request popularity is Zipf over prefix ranks:
    P(prefix p) ∝ (p + 1)^(-zipf_a), p = 0 the most popular (``zipf_a: 0`` = uniform).
    """

    kind: Literal["shared_prefix"]
    num_requests: RequestCount | None = Field(None, description="number of requests, ≤ 10^7")
    duration_s: PositiveFloat | None = Field(None, description="all arrivals before this, s")
    arrival: ArrivalConfig
    num_prefixes: PositiveInt = Field(description="number of distinct shared prefixes")
    prefix_tokens: LengthConfig = Field(description="length of each prefix, tokens")
    zipf_a: NonNegativeFloat = Field(1.0, description="Zipf exponent of prefix popularity")
    suffix_tokens: LengthConfig = Field(description="unique part after the prefix, tokens")
    output_tokens: LengthConfig

    @model_validator(mode="after")
    def _one_size(self) -> Self:
        _check_size(self.num_requests, self.duration_s, self.arrival, "num_requests")
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


class MultiTurnWorkload(Frozen):
    """Closed-loop chat sessions: each turn's prompt is the whole conversation so far.

    Turn k > 0 arrives ``think_s`` after turn k - 1 finishes; its prompt is turn k - 1's prompt
    + turn k - 1's answer + ``new_tokens``. A session ends early (after its last turn whose
    prompt fits) rather than exceed ``max_prompt_tokens``; a longer first prompt is clipped.
    """

    kind: Literal["multi_turn"]
    num_sessions: RequestCount | None = Field(None, description="number of sessions, ≤ 10^7")
    duration_s: PositiveFloat | None = Field(None, description="sessions start before this, s")
    arrival: ArrivalConfig = Field(description="arrival process of sessions (their turn 0)")
    turns: LengthConfig = Field(description="turns per session (≥ 1)")
    think_s: ThinkTimeConfig = Field(description="pause between a turn's end and the next turn")
    first_prompt_tokens: LengthConfig = Field(description="prompt of turn 0, tokens")
    new_tokens: LengthConfig = Field(description="new user tokens of each later turn")
    output_tokens: LengthConfig = Field(description="answer length of every turn, tokens")
    max_prompt_tokens: Tokens = Field(32768, description="longest prompt, tokens")

    @model_validator(mode="after")
    def _one_size(self) -> Self:
        _check_size(self.num_sessions, self.duration_s, self.arrival, "num_sessions")
        return self


class TraceColumns(Frozen):
    """Column mapping of a generic trace: which file column holds each request field."""

    prompt_tokens: str = Field("prompt_tokens", description="column of prompt lengths, tokens")
    output_tokens: str = Field("output_tokens", description="column of output lengths, tokens")
    arrival_s: str | None = Field(None, description="column of arrival times, s")
    arrival_ms: str | None = Field(None, description="column of arrival times, ms")
    priority: str | None = Field(None, description="column of priorities; None = all 0")

    @model_validator(mode="after")
    def _one_clock(self) -> Self:
        if self.arrival_s is not None and self.arrival_ms is not None:
            raise ValueError("give at most one of arrival_s and arrival_ms")
        return self


class TraceWorkload(Frozen):
    """Requests read from a trace file (Azure CSV, Mooncake JSONL, lengths-only, generic)."""

    kind: Literal["trace"]
    path: Path = Field(description="trace file; relative to the config file's directory")
    format: Literal["auto", "azure", "mooncake", "lengths", "generic"] = Field(
        "auto", description="file format; auto detects it from the header/keys"
    )
    columns: TraceColumns | None = Field(
        None, description="generic format only; None = simkv's column names"
    )
    time_scale: PositiveFloat = Field(1.0, description="multiplies every arrival time")
    rate: PositiveFloat | None = Field(
        None, description="rescale arrival times to this mean rate, requests/s"
    )
    limit: PositiveInt | None = Field(None, description="keep the first N requests")
    start_s: NonNegativeFloat | None = Field(None, description="window start (trace time), s")
    end_s: PositiveFloat | None = Field(None, description="window end (trace time, excluded), s")
    arrival: ArrivalConfig | None = Field(
        None,
        description="arrival process; required for traces without timestamps, and replaces "
        "the timestamps of a trace that has them",
    )
    sampling: SamplingConfig | None = Field(None, description=_SAMPLING_DESCRIPTION)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.rate is not None and self.time_scale != 1.0:
            raise ValueError("give at most one of rate and time_scale")
        if self.start_s is not None and self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError("end_s must be > start_s")
        if self.format == "lengths" and self.arrival is None:
            raise ValueError("a lengths-only trace has no timestamps: set arrival")
        if self.columns is not None and self.format not in ("auto", "generic"):
            raise ValueError("columns apply only to the generic format")
        if self.arrival is not None and self.arrival.ends_at_zero_rate:
            raise ValueError("a trace's arrival schedule must not end at rate 0")
        return self


WorkloadConfig = Annotated[
    SyntheticWorkload | SharedPrefixWorkload | MultiTurnWorkload | TraceWorkload | MeasuredWorkload,
    Field(discriminator="kind"),
]
