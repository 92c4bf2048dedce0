"""Workload configuration: synthetic generators or a trace file, chosen by ``kind``.

Kinds: ``synthetic`` (independent requests), ``shared_prefix`` (shared system prompts),
``multi_turn`` (closed-loop chat sessions), ``agentic`` (closed-loop tool-calling sessions with
subagent fan-out, :mod:`simkv.config.agentic`), ``trace`` and ``measured`` (a real engine's measured
run, :mod:`simkv.config.measured`).

Arrival processes, length distributions, priorities and think times are in
:mod:`simkv.config.distributions` (importable from here too); the workload is a discriminated
union on ``kind``; every default lives in these models. Relative paths are resolved against the
config file's directory when the workload is built (:func:`simkv.workload.build.build_workload`).
"""

from __future__ import annotations

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

from simkv.config.agentic import AgenticWorkload, FanoutConfig
from simkv.config.base import Frozen
from simkv.config.distributions import (
    ArrivalConfig,
    LengthConfig,
    PriorityConfig,
    ThinkTimeConfig,
)
from simkv.config.limits import MAX_REQUESTS, RequestCount, Tokens
from simkv.config.measured import MeasuredWorkload
from simkv.config.policy import traits_of
from simkv.config.sizes import check_size

__all__ = [
    "AgenticWorkload",
    "BeamSampling",
    "FanoutConfig",
    "MeasuredWorkload",
    "MultiTurnWorkload",
    "ParallelSampling",
    "SamplingConfig",
    "SharedPrefixWorkload",
    "SyntheticWorkload",
    "TraceColumns",
    "TraceWorkload",
    "WorkloadConfig",
    "check_sampling_scheduler",
]


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
        check_size(self.num_requests, self.duration_s, self.arrival, "num_requests")
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
    num_prefixes: int = Field(
        gt=0,
        le=MAX_REQUESTS,
        description=f"number of distinct shared prefixes, 1..{MAX_REQUESTS} (one length and "
        "one popularity each are drawn for every prefix)",
    )
    prefix_tokens: LengthConfig = Field(description="length of each prefix, tokens")
    zipf_a: NonNegativeFloat = Field(1.0, description="Zipf exponent of prefix popularity")
    suffix_tokens: LengthConfig = Field(description="unique part after the prefix, tokens")
    output_tokens: LengthConfig

    @model_validator(mode="after")
    def _one_size(self) -> Self:
        check_size(self.num_requests, self.duration_s, self.arrival, "num_requests")
        return self


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
        check_size(self.num_sessions, self.duration_s, self.arrival, "num_sessions")
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
    """Requests read from a trace file (Azure CSV, Mooncake or Qwen-Bailian JSONL, lengths-only,
    generic)."""

    kind: Literal["trace"]
    path: Path = Field(description="trace file; relative to the config file's directory")
    format: Literal["auto", "azure", "mooncake", "bailian", "lengths", "generic"] = Field(
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
    SyntheticWorkload
    | SharedPrefixWorkload
    | MultiTurnWorkload
    | AgenticWorkload
    | TraceWorkload
    | MeasuredWorkload,
    Field(discriminator="kind"),
]
