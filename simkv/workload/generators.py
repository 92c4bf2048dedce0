"""Synthetic workloads with prompt content identity, for prefix-caching studies.

* :func:`shared_prefix`: each prompt is one of N shared prefixes (system prompts, few-shot
  examples) followed by a suffix no other request shares.
* :func:`multi_turn`: closed-loop chat sessions whose turn k prompt repeats the whole
  conversation so far (turn k - 1's prompt and answer) before its new tokens.

Generators take already-sampled arrival times and *samplers* (``n -> n values``) for lengths and
think times, so they know nothing about configs; :mod:`simkv.workload.build` wires them up. Draws
happen in a documented order, so a seeded ``numpy.random.Generator`` gives identical workloads.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simkv.config.limits import MAX_REQUESTS, MAX_SEGMENTS
from simkv.workload.content import PromptContent
from simkv.workload.request import Workload

#: ``n -> n`` int64 token lengths ≥ 1.
LengthSampler = Callable[[int], np.ndarray]
#: ``n -> n`` float64 durations ≥ 0, seconds.
TimeSampler = Callable[[int], np.ndarray]


class WorkloadTooLarge(ValueError):
    """A generated workload would exceed :data:`~simkv.config.limits.MAX_REQUESTS` rows or
    :data:`~simkv.config.limits.MAX_SEGMENTS` content segments (checked before allocating)."""


def zipf_ranks(rng: np.random.Generator, n: int, num_items: int, a: float) -> np.ndarray:
    """``n`` 0-based ranks with P(rank r) ∝ (r + 1)^(-a); ``a = 0`` is uniform. int64."""
    weights = np.arange(1, num_items + 1, dtype=np.float64) ** -a
    return rng.choice(num_items, size=n, p=weights / weights.sum()).astype(np.int64)


def shared_prefix(
    rng: np.random.Generator,
    arrival_s: np.ndarray,
    *,
    num_prefixes: int,
    zipf_a: float,
    prefix_tokens: LengthSampler,
    suffix_tokens: LengthSampler,
    output_tokens: LengthSampler,
    source: str,
) -> Workload:
    """One request per arrival: prompt = (prefix p, its length) + (fresh id, suffix length).

    Ids: prefix ``p`` (0 = most popular) has segment id ``p``; request ``i``'s suffix has id
    ``num_prefixes + 2 i`` and its output ``num_prefixes + 2 i + 1``. Draw order: the
    ``num_prefixes`` prefix lengths, prefix choices, suffix lengths, output lengths.
    """
    n = len(arrival_s)
    prefix_lens = np.asarray(prefix_tokens(num_prefixes), dtype=np.int64)
    choice = zipf_ranks(rng, n, num_prefixes, zipf_a)
    suffix = np.asarray(suffix_tokens(n), dtype=np.int64)
    output = np.asarray(output_tokens(n), dtype=np.int64)
    fresh = num_prefixes + 2 * np.arange(n, dtype=np.int64)
    seg_ids = np.empty(2 * n, np.int64)
    seg_lens = np.empty(2 * n, np.int64)
    seg_ids[0::2], seg_ids[1::2] = choice, fresh
    seg_lens[0::2], seg_lens[1::2] = prefix_lens[choice], suffix
    content = PromptContent(seg_ids, seg_lens, 2 * np.arange(n + 1, dtype=np.int64), fresh + 1)
    return Workload(
        np.asarray(arrival_s, dtype=np.float64),
        prefix_lens[choice] + suffix,
        output,
        np.zeros(n, np.int64),
        source,
        content,
    )


def _session_rows(turns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row (sessions' turns laid out contiguously): session index, turn, session's 1st row."""
    session = np.repeat(np.arange(len(turns), dtype=np.int64), turns)
    first_row = np.repeat(np.cumsum(turns) - turns, turns)
    return session, np.arange(len(session), dtype=np.int64) - first_row, first_row


def _conversation_content(
    added: np.ndarray, output: np.ndarray, turn: np.ndarray, first_row: np.ndarray
) -> PromptContent:
    """Content of contiguous session rows: row r's prompt = stream[2 s : 2 r + 1].

    The stream interleaves each row's new tokens (segment id ``2 r``, ``added[r]`` tokens) and
    its answer (id ``2 r + 1``, ``output[r]`` tokens); ``s`` is the session's first row.
    """
    stream_lens = np.empty(2 * len(added), np.int64)
    stream_lens[0::2], stream_lens[1::2] = added, output
    counts = 2 * turn + 1
    offsets = np.zeros(len(added) + 1, np.int64)
    offsets[1:] = np.cumsum(counts)
    within = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], counts)
    seg_ids = np.repeat(2 * first_row, counts) + within
    output_ids = 2 * np.arange(len(added), dtype=np.int64) + 1
    return PromptContent(seg_ids, stream_lens[seg_ids], offsets, output_ids)


def multi_turn(
    session_arrival_s: np.ndarray,
    *,
    turns: LengthSampler,
    first_prompt_tokens: LengthSampler,
    new_tokens: LengthSampler,
    output_tokens: LengthSampler,
    think_s: TimeSampler,
    max_prompt_tokens: int,
    source: str,
) -> Workload:
    """Sessions starting at ``session_arrival_s``, each turn's prompt the conversation so far.

    Turn k > 0's prompt = turn k - 1's segments + (turn k - 1's output id, its output length) +
    (a fresh id, new tokens). Turn 0's prompt is clipped to ``max_prompt_tokens``; a session
    stops before its first later turn whose prompt would exceed it. Rows are session-major;
    segment ids follow :func:`_conversation_content`; ``session_id`` is the session's index.
    Draw order (before truncation): turns (one per session), first prompts (one per session),
    new tokens (one per later turn), outputs (one per turn), think times (one per later turn).
    Segments per session grow quadratically with its turns (turn k holds 2 k + 1 of them).
    """
    num_sessions = len(session_arrival_s)
    per_session = np.asarray(turns(num_sessions), dtype=np.int64)
    if per_session.sum() > MAX_REQUESTS:
        raise WorkloadTooLarge(
            f"{num_sessions:,} sessions draw {int(per_session.sum()):,} turns, more than "
            f"{MAX_REQUESTS:,} requests (simkv.config.limits.MAX_REQUESTS)"
        )
    first = np.minimum(np.asarray(first_prompt_tokens(num_sessions), np.int64), max_prompt_tokens)
    session, turn, first_row = _session_rows(per_session)
    later = turn > 0
    added = np.empty(len(turn), np.int64)
    added[~later] = first
    added[later] = new_tokens(int(later.sum()))
    output = np.asarray(output_tokens(len(turn)), dtype=np.int64)
    think = np.zeros(len(turn), np.float64)
    think[later] = think_s(int(later.sum()))
    done = np.cumsum(added + output)  # tokens of the session stream up to row r's answer
    prompt = done - output - (done[first_row] - added[first_row] - output[first_row])
    keep = prompt <= max_prompt_tokens  # prompts grow within a session: keeps leading turns
    kept_turns = np.bincount(session[keep], minlength=num_sessions)
    segments = int(np.square(kept_turns).sum())  # a session of k turns holds k² segments
    if segments > MAX_SEGMENTS:
        raise WorkloadTooLarge(
            f"sessions of up to {int(kept_turns.max()):,} turns hold {segments:,} prompt "
            f"segments, more than {MAX_SEGMENTS:,} (simkv.config.limits.MAX_SEGMENTS); fewer "
            "turns or a smaller max_prompt_tokens"
        )
    _, kept_turn, kept_first = _session_rows(kept_turns)
    content = _conversation_content(added[keep], output[keep], kept_turn, kept_first)
    return Workload(
        np.repeat(np.asarray(session_arrival_s, dtype=np.float64), kept_turns),
        prompt[keep],
        output[keep],
        np.zeros(len(kept_turn), np.int64),
        source,
        content,
        session[keep],
        kept_turn,
        think[keep],
    )
