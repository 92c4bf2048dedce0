"""Closed-loop multi-turn sessions: which request follows which, and after what think time."""

from __future__ import annotations

from simkv.workload.request import Workload


class Sessions:
    """Turn k + 1 of a session arrives ``think_s`` after turn k leaves the system.

    ``independent`` lists, in arrival order, the requests that arrive on their own clock (turn 0
    of a session, or any request of a workload without sessions); ``closed_loop`` says whether
    any request follows another.
    """

    def __init__(self, workload: Workload) -> None:
        n = len(workload)
        self._next: dict[int, int] = {}
        if workload.session_id is None or workload.turn is None or workload.think_s is None:
            self.independent: range | list[int] = range(n)
            self._think: list[float] = []
            self.closed_loop = False
            return
        sessions, turns = workload.session_id.tolist(), workload.turn.tolist()
        self._think = workload.think_s.tolist()
        self.independent = []
        last: dict[int, int] = {}
        for i in range(n):
            if turns[i] == 0:
                self.independent.append(i)
            else:
                self._next[last[sessions[i]]] = i
            last[sessions[i]] = i
        self.closed_loop = bool(self._next)

    def follow_up(self, i: int) -> tuple[int, float] | None:
        """The request that follows request ``i`` and its think time, if any."""
        j = self._next.get(i)
        return None if j is None else (j, self._think[j])
