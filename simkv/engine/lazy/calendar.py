"""Event calendars of the decode lane (:mod:`simkv.engine.lazy.cohort`): tick → the members
with an event at that tick, in no particular order (sort with :data:`by_order` when running
order matters)."""

from __future__ import annotations

from operator import attrgetter

from simkv.engine.request.seq import Seq

Calendar = dict[int, list[Seq]]  # tick → members with an event at it

by_order = attrgetter("order")  # a member's join stamp: running order among members


def add(calendar: Calendar, tick: int, seq: Seq) -> None:
    """``seq`` has an event at ``tick``."""
    due = calendar.get(tick)
    if due is None:
        calendar[tick] = [seq]
    else:
        due.append(seq)


def drop(calendar: Calendar, tick: int, seq: Seq) -> None:
    """``seq``'s event at ``tick`` is off (it is there)."""
    due = calendar[tick]
    due.remove(seq)
    if not due:
        del calendar[tick]
