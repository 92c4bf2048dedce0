"""Agentic sessions: closed-loop tool-calling agents whose every call resends its context.

Content layout (chained segments, :mod:`simkv.workload.content`). Session ``s`` with ``K`` main
calls has a *stream* of segments ``[system, task, out_0, tool_0, out_1, …, tool_{K-2},
out_{K-1}]``: call k's prompt is the stream's first ``2 + 2 k`` segments and its generated
tokens carry ``out_k``'s id, so call k + 1's prompt (= call k's prompt + answer + tool output)
extends call k's prompt and answer exactly. A subagent of call k has the stream's first
``3 + 2 k`` segments (call k's prompt and answer) plus its own task segment, and its own output
id. The system segment has id 0 in every session (one shared system prompt); every other id
is unique in the workload.

Rows are session-major; within a session: call 0, call 0's subagents, call 1, … . ``turn`` is
the step: subagents of a call share one turn, one more than their parent's, and the next call
has one more again, so :class:`simkv.engine.sessions.Sessions` makes it wait for all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simkv.config.limits import MAX_REQUESTS, MAX_SEGMENTS
from simkv.workload.content import PromptContent
from simkv.workload.generators import LengthSampler, TimeSampler, WorkloadTooLarge
from simkv.workload.request import Workload

#: ``n -> n`` booleans: which of ``n`` calls (each call k of its session, k + 1 given) fan out.
FanoutSampler = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Fanout:
    """Samplers of a subagent fan-out: which calls fan out (from each call's 1-based index),
    children per fan-out, each child's task and answer lengths."""

    fans: FanoutSampler
    children: LengthSampler
    child_tokens: LengthSampler
    child_output_tokens: LengthSampler


@dataclass(frozen=True)
class _Rows:
    """Per row: its main-stream slice ``[start, stop)``, whether it is a subagent (whose own
    task is child segment ``child``), its turn and think time, its session."""

    start: np.ndarray
    stop: np.ndarray
    is_child: np.ndarray
    child: np.ndarray
    turn: np.ndarray
    think_s: np.ndarray
    session: np.ndarray

    def keep(self, mask: np.ndarray) -> _Rows:
        """The rows where ``mask`` holds."""
        return _Rows(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))


def _within(counts: np.ndarray) -> np.ndarray:
    """0, 1, …, counts[i] - 1 for every i, concatenated (int64)."""
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(int(counts.sum()), dtype=np.int64) - starts


def _main_stream(
    calls: np.ndarray, system_tokens: int, task: np.ndarray, output: np.ndarray, tool: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Lengths of every session's stream (concatenated) and each session's first index."""
    size = 2 * calls + 1
    first = np.cumsum(size) - size
    lens = np.empty(int(size.sum()), np.int64)
    lens[first] = system_tokens
    lens[first + 1] = task
    out_pos = np.repeat(first, calls) + 2 * _within(calls) + 2
    lens[out_pos] = output
    lens[out_pos[_within(calls) > 0] - 1] = tool
    return lens, first


def _layout(
    calls: np.ndarray, first: np.ndarray, children: np.ndarray, tool_s: np.ndarray
) -> _Rows:
    """Rows of main calls (``tool_s``: think time of each) and their ``children``."""
    k = _within(calls)
    steps = np.where(children > 0, 2, 1)  # a call with subagents takes two turns
    call_turn = np.cumsum(steps) - steps
    call_turn -= np.repeat(call_turn[np.cumsum(calls) - calls], calls)
    per_call = 1 + children
    row_call = np.repeat(np.arange(len(k), dtype=np.int64), per_call)
    is_child = _within(per_call) > 0
    start = np.repeat(first, calls)[row_call]
    return _Rows(
        start=start,
        stop=start + 2 + 2 * k[row_call] + is_child,
        is_child=is_child,
        child=np.cumsum(is_child) - 1,
        turn=call_turn[row_call] + is_child,
        think_s=np.where(is_child, 0.0, tool_s[row_call]),
        session=np.repeat(np.arange(len(calls), dtype=np.int64), calls)[row_call],
    )


def _content(
    rows: _Rows, stream_lens: np.ndarray, first: np.ndarray, child_lens: np.ndarray
) -> PromptContent:
    """Segments of every row (module docstring for the ids)."""
    size = len(stream_lens)
    stream_ids = np.arange(1, size + 1, dtype=np.int64)
    stream_ids[first] = 0  # the shared system prompt
    main = rows.stop - rows.start
    counts = main + rows.is_child
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    ids, lens = np.empty(int(offsets[-1]), np.int64), np.empty(int(offsets[-1]), np.int64)
    own = np.zeros(len(ids), dtype=bool)
    own[offsets[1:][rows.is_child] - 1] = True
    pos = np.repeat(rows.start, main) + _within(main)
    ids[~own], lens[~own] = stream_ids[pos], stream_lens[pos]
    child = rows.child[rows.is_child]
    ids[own], lens[own] = size + 1 + child, child_lens[child]
    output_ids = np.where(rows.is_child, size + 1 + len(child_lens) + rows.child, rows.stop + 1)
    return PromptContent(ids, lens, offsets, output_ids)


def _prompts(rows: _Rows, stream_lens: np.ndarray, child_lens: np.ndarray) -> np.ndarray:
    """Prompt tokens of every row."""
    cum = np.concatenate(([0], np.cumsum(stream_lens)))
    own = _of_children(rows, child_lens, np.zeros(len(rows.start), np.int64))
    return cum[rows.stop] - cum[rows.start] + own


def _of_children(rows: _Rows, per_child: np.ndarray, others: np.ndarray) -> np.ndarray:
    """``others`` with each subagent row's entry replaced by its ``per_child`` value."""
    out = others.copy()
    out[rows.is_child] = per_child[rows.child[rows.is_child]]
    return out


def _leading(rows: _Rows, fits: np.ndarray) -> np.ndarray:
    """Rows before their session's first row that does not fit (rows are session-major)."""
    misfits = np.cumsum(~fits)
    starts = np.ones(len(fits), dtype=bool)
    starts[1:] = rows.session[1:] != rows.session[:-1]
    before = np.maximum.accumulate(np.where(starts, misfits - ~fits, 0))
    return misfits == before


def _draw_calls(
    n_sessions: int,
    calls: LengthSampler,
    task_tokens: LengthSampler,
    output_tokens: LengthSampler,
    tool_s: TimeSampler,
    tool_output_tokens: LengthSampler,
    max_task_tokens: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Main calls per session, tasks (clipped to ``max_task_tokens``), then per call: answer,
    tool time (0 for call 0) and, per later call, tool output; in that draw order."""
    calls_n = np.asarray(calls(n_sessions), np.int64)
    _check_size(int(calls_n.sum()), 0)
    task = np.minimum(np.asarray(task_tokens(n_sessions), np.int64), max_task_tokens)
    output = np.asarray(output_tokens(int(calls_n.sum())), np.int64)
    later = _within(calls_n) > 0
    call_tool_s = np.zeros(len(later), np.float64)
    call_tool_s[later] = tool_s(int(later.sum()))
    tool = np.asarray(tool_output_tokens(int(later.sum())), np.int64)
    return calls_n, task, output, call_tool_s, tool


def _draw_children(fanout: Fanout | None, calls: np.ndarray) -> np.ndarray:
    """Subagents of every main call (0 for a session's last call and without a fan-out)."""
    children = np.zeros(int(calls.sum()), np.int64)
    if fanout is None:
        return children
    k = _within(calls)
    may = k < np.repeat(calls, calls) - 1  # a session's last call has no next call to join
    fans = np.zeros(len(k), dtype=bool)
    fans[may] = fanout.fans(k[may] + 1)
    children[fans] = np.asarray(fanout.children(int(fans.sum())), np.int64)
    return children


def _child_lengths(fanout: Fanout | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Task and answer lengths of ``n`` subagents (empty without a fan-out)."""
    if fanout is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    task = np.asarray(fanout.child_tokens(n), np.int64)
    return task, np.asarray(fanout.child_output_tokens(n), np.int64)


def _check_size(num_rows: int, num_segments: int) -> None:
    """Raise :class:`WorkloadTooLarge` beyond MAX_REQUESTS rows or MAX_SEGMENTS segments."""
    if num_rows > MAX_REQUESTS:
        raise WorkloadTooLarge(
            f"sessions draw {num_rows:,} calls, more than {MAX_REQUESTS:,} requests "
            "(simkv.config.limits.MAX_REQUESTS)"
        )
    if num_segments > MAX_SEGMENTS:
        raise WorkloadTooLarge(
            f"calls hold {num_segments:,} prompt segments, more than {MAX_SEGMENTS:,} "
            "(simkv.config.limits.MAX_SEGMENTS); fewer calls or a smaller max_prompt_tokens"
        )


def agentic(
    session_arrival_s: np.ndarray,
    *,
    calls: LengthSampler,
    system_prompt_tokens: int,
    task_tokens: LengthSampler,
    output_tokens: LengthSampler,
    tool_s: TimeSampler,
    tool_output_tokens: LengthSampler,
    fanout: Fanout | None,
    max_prompt_tokens: int,
    pin_ttl_s: float | None,
    source: str,
) -> Workload:
    """Agent sessions starting at ``session_arrival_s`` (layout and ids: module docstring).

    Call 0's task is clipped so that its prompt fits ``max_prompt_tokens`` (which must exceed
    ``system_prompt_tokens``); a session ends before its first row whose prompt would not fit.
    Draw order (before truncation): calls (one per session), tasks (one per session), answers
    (one per call), tool times and tool outputs (one per later call each), then with a fan-out:
    fan-out choices (calls that may fan out), children (one per fan-out), child tasks and child
    answers (one per child each).
    """
    calls_n, task, output, call_tool_s, tool = _draw_calls(
        len(session_arrival_s),
        calls,
        task_tokens,
        output_tokens,
        tool_s,
        tool_output_tokens,
        max_prompt_tokens - system_prompt_tokens,
    )
    children = _draw_children(fanout, calls_n)
    _check_size(int(calls_n.sum() + children.sum()), 0)
    child_lens, child_output = _child_lengths(fanout, int(children.sum()))
    stream_lens, first = _main_stream(calls_n, system_prompt_tokens, task, output, tool)
    rows = _layout(calls_n, first, children, call_tool_s)
    prompt = _prompts(rows, stream_lens, child_lens)
    kept = _leading(rows, prompt <= max_prompt_tokens)
    rows, prompt = rows.keep(kept), prompt[kept]
    _check_size(len(prompt), int((rows.stop - rows.start + rows.is_child).sum()))
    answer = _of_children(rows, child_output, stream_lens[rows.stop - rows.is_child])
    n = len(prompt)
    return Workload(
        np.asarray(session_arrival_s, np.float64)[rows.session],
        prompt,
        answer,
        np.zeros(n, np.int64),
        source,
        _content(rows, stream_lens, first, child_lens),
        rows.session,
        rows.turn,
        rows.think_s,
        None if pin_ttl_s is None else np.full(n, pin_ttl_s, np.float64),
    )
