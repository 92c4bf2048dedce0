"""The columns of a :class:`~simkv.workload.request.Workload` and their invariants, checked
when a workload is made (:func:`check_columns`; the invariants are listed in ``Workload``'s
docstring).

The checks read a workload through :class:`WorkloadColumns`, the columns as attributes, so
that this module needs nothing from :mod:`simkv.workload.request`.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from simkv.workload.content import PromptContent

__all__ = [
    "COLUMNS",
    "RETENTION_COLUMNS",
    "SAMPLING_COLUMNS",
    "SESSION_COLUMNS",
    "WorkloadColumns",
    "check_columns",
]

COLUMNS: dict[str, np.dtype] = {
    "arrival_s": np.dtype(np.float64),
    "prompt_tokens": np.dtype(np.int64),
    "output_tokens": np.dtype(np.int64),
    "priority": np.dtype(np.int64),
}
SESSION_COLUMNS: dict[str, np.dtype] = {
    "session_id": np.dtype(np.int64),
    "turn": np.dtype(np.int64),
    "think_s": np.dtype(np.float64),
}
RETENTION_COLUMNS: dict[str, np.dtype] = {"pin_ttl_s": np.dtype(np.float64)}
SAMPLING_COLUMNS: dict[str, np.dtype] = {
    "n_seqs": np.dtype(np.int64),
    "fork_after": np.dtype(np.int64),
    "beam": np.dtype(np.bool_),
}


class WorkloadColumns(Protocol):
    """A workload's columns as :func:`check_columns` reads them (``Workload`` is one)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    priority: np.ndarray
    content: PromptContent | None
    session_id: np.ndarray | None
    turn: np.ndarray | None
    think_s: np.ndarray | None
    pin_ttl_s: np.ndarray | None
    n_seqs: np.ndarray | None
    fork_after: np.ndarray | None
    beam: np.ndarray | None

    def __len__(self) -> int: ...


def check_columns(w: WorkloadColumns) -> None:
    """Raise ValueError naming the first request that breaks an invariant of the values, the
    prompt content, the session columns or the sampling columns."""
    _check_values(w)
    _check_content(w)
    _check_sessions(w)
    _check_sampling(w)


def _check_values(w: WorkloadColumns) -> None:
    """Raise ValueError naming the first request that breaks a value invariant."""
    checks = (
        ("arrival_s", ~np.isfinite(w.arrival_s) | (w.arrival_s < 0), "finite and ≥ 0"),
        ("prompt_tokens", w.prompt_tokens < 1, "≥ 1"),
        ("output_tokens", w.output_tokens < 1, "≥ 1"),
    )
    for name in ("think_s", "pin_ttl_s"):
        values = getattr(w, name)
        if values is not None:
            checks += ((name, ~np.isfinite(values) | (values < 0), "finite and ≥ 0"),)
    for name, bad, rule in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name}[{i}] = {getattr(w, name)[i]} must be {rule}")
    if len(w) > 1:
        back = np.diff(w.arrival_s) < 0
        if back.any():
            i = int(np.argmax(back)) + 1
            raise ValueError(f"arrival_s must be non-decreasing: [{i}] < [{i - 1}]")


def _check_content(w: WorkloadColumns) -> None:
    """Raise ValueError unless ``content`` covers every request with its exact prompt length."""
    c = w.content
    if c is None:
        return
    if not isinstance(c, PromptContent) or len(c) != len(w):
        raise ValueError(f"content must be a PromptContent of {len(w)} requests")
    empty = np.diff(c.offsets) == 0
    if empty.any():
        raise ValueError(f"content of request {int(np.argmax(empty))} has no segments")
    if (len(c.seg_ids) and int(c.seg_ids.min()) < 0) or (len(c) and int(c.output_ids.min()) < 0):
        raise ValueError("content ids must be ≥ 0 (negative ids are reserved for simkv)")
    sums = c.prompt_tokens()
    bad = sums != w.prompt_tokens
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"content of request {i}: segments sum to {sums[i]} tokens, "
            f"prompt_tokens[{i}] = {w.prompt_tokens[i]}"
        )


def _all_or_none(w: WorkloadColumns, names: tuple[str, ...]) -> bool:
    """Whether the optional columns ``names`` are present; ValueError if only some are."""
    present = [getattr(w, name) is not None for name in names]
    if any(present) and not all(present):
        listed = f"{', '.join(names[:-1])} and {names[-1]}"
        count = {2: "two", 3: "three", 4: "four"}.get(len(names), str(len(names)))
        raise ValueError(f"{listed} go together: give all {count} or none")
    return all(present)


def _check_sessions(w: WorkloadColumns) -> None:
    """Raise ValueError unless session columns are all present or all absent, and consistent."""
    if not _all_or_none(w, tuple(SESSION_COLUMNS)):
        return
    if w.session_id is None or w.turn is None:  # present, as _all_or_none found: for the types
        return
    order = np.argsort(w.session_id, kind="stable")
    ranks = np.arange(len(w))
    sorted_ids = w.session_id[order]
    starts = np.ones(len(w), dtype=bool)
    starts[1:] = sorted_ids[1:] != sorted_ids[:-1]
    group_start = np.maximum.accumulate(np.where(starts, ranks, 0))
    step = w.turn[order]
    before = np.roll(step, 1)  # the previous row's step, within a session
    grows = ((step == before) & (step > 0)) | (step == before + 1)  # one turn 0, then waves
    bad, expected = np.empty(len(w), dtype=bool), np.empty(len(w), np.int64)
    bad[order] = np.where(starts, step != 0, ~grows)
    expected[order] = np.where(starts, 0, before + 1)
    if bad.any():  # a repeated turn (parallel calls of one step) is allowed, hence "expected"
        i = int(np.argmax(bad))
        raise ValueError(
            f"turn[{i}] = {w.turn[i]}, expected {expected[i]}: the turns of session "
            f"{w.session_id[i]} must be 0, 1, 2, ... in array order"
        )
    first = np.empty(len(w), np.int64)
    first[order] = order[group_start]
    late = w.arrival_s != w.arrival_s[first]
    if late.any():
        i = int(np.argmax(late))
        raise ValueError(
            f"arrival_s[{i}] = {w.arrival_s[i]} must equal its session's turn-0 "
            f"arrival_s[{first[i]}] = {w.arrival_s[first[i]]}"
        )


def _check_sampling(w: WorkloadColumns) -> None:
    """Raise ValueError unless the sampling columns are all present or all absent, and valid."""
    if not _all_or_none(w, tuple(SAMPLING_COLUMNS)):
        return
    if w.n_seqs is None or w.fork_after is None or w.beam is None:  # present (_all_or_none)
        return
    checks = (
        ("n_seqs", w.n_seqs < 1, "≥ 1"),
        ("fork_after", w.fork_after < 0, "≥ 0"),
        ("fork_after", w.beam & (w.fork_after != 0), "0 for beam search"),
    )
    for name, bad, rule in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name}[{i}] = {getattr(w, name)[i]} must be {rule}")
