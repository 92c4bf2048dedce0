"""Closed-loop sessions: which requests follow which, and after what think time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simkv.workload.request import Workload

_NONE: tuple[tuple[int, float], ...] = ()


def _has_waves(session_id: np.ndarray, turn: np.ndarray) -> bool:
    """Whether some session has two requests of one turn (then rows > its last turn + 1)."""
    _, inverse = np.unique(session_id, return_inverse=True)
    last_turn = np.zeros(int(inverse.max(initial=-1)) + 1, np.int64)
    np.maximum.at(last_turn, inverse, turn)
    return bool((np.bincount(inverse) > last_turn + 1).any())


class Sessions:
    """The requests of turn k + 1 of a session wait for every request of its turn k.

    A session's rows with one turn number form a *wave* (one request for a chat turn; an
    agent's parallel subagent calls for an agentic one). When the last request of wave k leaves
    the system, each request j of wave k + 1 arrives its own ``think_s[j]`` later.

    ``independent`` lists, in arrival order, the requests that arrive on their own clock (turn 0
    of a session, or any request of a workload without sessions); ``closed_loop`` says whether
    any request follows another. Invariants: every request of a session but its turn 0 belongs
    to exactly one wave's followers; ``_left[w]`` is the number of wave ``w``'s requests that
    have not left, and a wave's followers are released once, when it reaches 0 (each request
    must be reported to :meth:`follow_up` once). When every wave holds one request (chat
    sessions), ``_chain`` maps each request straight to its follower instead (one lookup).
    """

    def __init__(self, workload: Workload) -> None:
        n = len(workload)
        self._wave: dict[int, int] = {}
        self._left: list[int] = []
        self._followers: list[list[int]] = []
        self._chain: dict[int, tuple[tuple[int, float]]] | None = {}
        if workload.session_id is None or workload.turn is None or workload.think_s is None:
            self.independent: range | list[int] = range(n)
            self._think: list[float] = []
            self.closed_loop = False
            return
        self._think = workload.think_s.tolist()
        self.independent = []
        sessions, turns = workload.session_id.tolist(), workload.turn.tolist()
        if _has_waves(workload.session_id, workload.turn):
            self._chain = None
            self._build(sessions, turns)
        else:
            self._build_chain(sessions, turns)
        self.closed_loop = bool(self._chain) or any(self._followers)

    def _build_chain(self, sessions: list[int], turns: list[int]) -> None:
        """Chat sessions: each request but a session's last is followed by the next one."""
        chain: dict[int, tuple[tuple[int, float]]] = {}
        think, last = self._think, dict[int, int]()
        for i in range(len(turns)):
            if turns[i] == 0:
                self.independent.append(i)
            else:
                chain[last[sessions[i]]] = ((i, think[i]),)
            last[sessions[i]] = i
        self._chain = chain

    def _build(self, sessions: list[int], turns: list[int]) -> None:
        """Waves in array order: a session's row joins its latest wave when the turn repeats,
        else starts a new wave; either way it follows the wave before."""
        latest: dict[int, tuple[int, int, int | None]] = {}  # session -> (wave, turn, wave before)
        for i, (session, turn) in enumerate(zip(sessions, turns, strict=True)):
            seen = latest.get(session)
            if seen is None or seen[1] != turn:
                before = None if seen is None else seen[0]
                wave = len(self._left)
                self._left.append(0)
                self._followers.append([])
                latest[session] = (wave, turn, before)
            else:
                wave, _, before = seen
            self._left[wave] += 1
            self._wave[i] = wave
            if before is None:  # turn 0 (Workload checks that turns start at 0)
                self.independent.append(i)
            else:
                self._followers[before].append(i)

    def follow_up(self, i: int) -> Sequence[tuple[int, float]]:
        """The requests released by request ``i``'s leaving, each with its think time: the next
        wave of its session when ``i`` is the last of its wave to leave, else none."""
        if self._chain is not None:
            return self._chain.get(i, _NONE)
        wave = self._wave.get(i)
        if wave is None:
            return _NONE
        self._left[wave] -= 1
        if self._left[wave]:
            return _NONE
        think = self._think
        return [(j, think[j]) for j in self._followers[wave]]
