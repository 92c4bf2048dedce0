"""Agentic workload configuration: closed-loop tool-calling sessions with subagent fan-out.

A session is a chain of *calls* of one agent. Call 0's prompt is a system prompt that every
session shares plus the session's task; call k + 1 arrives a tool time after call k's answer
(and after every subagent call k spawned) and its prompt is call k's prompt + call k's answer +
the tool's output, so each call resends the whole context, as coding agents do. A fan-out makes
call k spawn parallel child calls whose prompts are call k's prompt + answer + their own task.
Generation is :func:`simkv.workload.agentic.agentic`; the draw order is documented there.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt, model_validator

from simkv.config.base import Frozen
from simkv.config.distributions import ArrivalConfig, LengthConfig, ThinkTimeConfig
from simkv.config.limits import RequestCount, Tokens
from simkv.config.sizes import check_size

__all__ = ["AgenticWorkload", "FanoutConfig"]


class FanoutConfig(Frozen):
    """Subagent fan-out: a call (never a session's last) spawns ``children`` parallel calls.

    Call k (0-based) fans out when ``every`` divides k + 1, or else with ``probability``
    (one uniform draw per call that may fan out). The children arrive as soon as their parent's
    answer is complete (the spawn is the answer's tool call); the parent's next call waits for
    all of them (a join) and then its tool time.
    """

    probability: float = Field(
        0.0, ge=0.0, le=1.0, description="chance that a call spawns subagents, 0..1"
    )
    every: PositiveInt | None = Field(
        None, description="every N-th call spawns subagents; None = by probability only"
    )
    children: LengthConfig = Field(description="subagent calls per fan-out (≥ 1)")
    child_tokens: LengthConfig = Field(description="each subagent's own task after the parent's")
    child_output_tokens: LengthConfig = Field(description="answer of each subagent, tokens")

    @model_validator(mode="after")
    def _can_fan_out(self) -> Self:
        if self.every is None and self.probability == 0.0:
            raise ValueError("a fanout needs probability > 0 or every")
        return self


class AgenticWorkload(Frozen):
    """Closed-loop agent sessions (the module docstring), with optional subagent fan-out.

    A session ends early (after its last call whose prompt fits) rather than let a prompt
    exceed ``max_prompt_tokens``; a subagent call that would exceed it ends the session there.
    ``pin_ttl_s`` is a retention hint recorded per request (workload column ``pin_ttl_s``),
    as prompt-caching APIs let a client keep a prefix cached for a time; it is for the KV
    tiers to honour and changes nothing in the workload itself.
    """

    kind: Literal["agentic"]
    num_sessions: RequestCount | None = Field(None, description="number of sessions, ≤ 10^7")
    duration_s: PositiveFloat | None = Field(None, description="sessions start before this, s")
    arrival: ArrivalConfig = Field(description="arrival process of sessions (their call 0)")
    calls: LengthConfig = Field(description="calls of the main agent per session (≥ 1)")
    system_prompt_tokens: Tokens = Field(
        description="system prompt (tool definitions, instructions) every session opens with"
    )
    task_tokens: LengthConfig = Field(description="the session's task after the system prompt")
    output_tokens: LengthConfig = Field(description="answer (tool call) of each main call")
    tool_s: ThinkTimeConfig = Field(
        description="time from a call's answer (or its subagents' join) to the next call, s"
    )
    tool_output_tokens: LengthConfig = Field(description="tool output appended to each call")
    fanout: FanoutConfig | None = Field(None, description="subagent fan-out; None = none")
    max_prompt_tokens: Tokens = Field(
        131072, description="longest prompt, tokens (a 128 Ki context, as Qwen2.5-Coder's)"
    )
    pin_ttl_s: NonNegativeFloat | None = Field(
        None,
        description="retention hint: keep a session's prefix cached this long after each of "
        "its calls, s (Anthropic's prompt caching: 300 s or 3600 s); None = no hint",
    )

    @model_validator(mode="after")
    def _one_size(self) -> Self:
        check_size(self.num_sessions, self.duration_s, self.arrival, "num_sessions")
        if self.system_prompt_tokens >= self.max_prompt_tokens:
            raise ValueError(
                f"system_prompt_tokens must be below max_prompt_tokens "
                f"({self.max_prompt_tokens}), got {self.system_prompt_tokens}"
            )
        return self
