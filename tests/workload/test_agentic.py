"""Agentic sessions: golden layout, prefix extension (hypothesis), determinism, waves."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.config.agentic import AgenticWorkload
from simkv.engine.sessions import Sessions
from simkv.workload.build import build_workload
from simkv.workload.content import block_keys
from simkv.workload.request import Workload


def _cfg(**over) -> AgenticWorkload:
    data = {
        "kind": "agentic",
        "num_sessions": 1,
        "arrival": {"kind": "poisson", "rate": 1.0},
        "calls": {"kind": "fixed", "value": 3},
        "system_prompt_tokens": 100,
        "task_tokens": {"kind": "fixed", "value": 10},
        "output_tokens": {"kind": "fixed", "value": 5},
        "tool_s": {"kind": "fixed", "value_s": 2.0},
        "tool_output_tokens": {"kind": "fixed", "value": 7},
        "fanout": {
            "every": 1,
            "children": {"kind": "fixed", "value": 2},
            "child_tokens": {"kind": "fixed", "value": 3},
            "child_output_tokens": {"kind": "fixed", "value": 4},
        },
        "pin_ttl_s": 300.0,
    }
    data.update(over)
    return AgenticWorkload.model_validate(data)


def _build(cfg: AgenticWorkload, seed: int = 0) -> Workload:
    return build_workload(cfg, np.random.default_rng(seed), Path("."))


def test_golden_session_with_fanout_every_call():
    """3 calls, each but the last spawning 2 subagents: 7 rows, hand-computed."""
    w = _build(_cfg())
    f = w.to_frame()
    assert f["turn"].tolist() == [0, 1, 1, 2, 3, 3, 4]
    assert f["prompt_tokens"].tolist() == [110, 118, 118, 122, 130, 130, 134]
    assert f["output_tokens"].tolist() == [5, 4, 4, 5, 4, 4, 5]
    assert f["think_s"].tolist() == [0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 2.0]
    assert f["pin_ttl_s"].tolist() == [300.0] * 7
    # stream ids: system 0, task 2, out_0 3, tool_0 4, out_1 5, tool_1 6, out_2 7 (size 7);
    # child tasks 8..11, child outputs 12..15
    assert f["segments"][0] == [(0, 100), (2, 10)]
    assert f["segments"][1] == [(0, 100), (2, 10), (3, 5), (8, 3)]
    assert f["segments"][2] == [(0, 100), (2, 10), (3, 5), (9, 3)]
    assert f["segments"][3] == [(0, 100), (2, 10), (3, 5), (4, 7)]
    assert f["segments"][6] == [(0, 100), (2, 10), (3, 5), (4, 7), (5, 5), (6, 7)]
    assert f["output_id"].tolist() == [3, 12, 13, 5, 14, 15, 7]


def test_waves_release_after_the_last_child_leaves():
    w = _build(_cfg())
    sessions = Sessions(w)
    assert sessions.independent == [0] and sessions.closed_loop
    assert sessions.follow_up(0) == [(1, 0.0), (2, 0.0)]
    assert list(sessions.follow_up(2)) == []  # child 1 still runs: no join yet
    assert sessions.follow_up(1) == [(3, 2.0)]
    assert list(sessions.follow_up(6)) == []  # the session's last call


def test_max_prompt_ends_the_session_before_the_first_misfit():
    w = _build(_cfg(max_prompt_tokens=125))
    assert w.prompt_tokens.tolist() == [110, 118, 118, 122]


def test_same_seed_same_workload_other_seed_differs():
    cfg = _cfg(
        num_sessions=20,
        calls={"kind": "uniform", "low": 1, "high": 9},
        tool_s={"kind": "exponential", "mean_s": 1.0},
        fanout={
            "probability": 0.3,
            "children": {"kind": "uniform", "low": 1, "high": 4},
            "child_tokens": {"kind": "uniform", "low": 1, "high": 50},
            "child_output_tokens": {"kind": "uniform", "low": 1, "high": 50},
        },
    )
    a, b, c = _build(cfg, 7).to_frame(), _build(cfg, 7).to_frame(), _build(cfg, 8).to_frame()
    assert a.equals(b)
    assert not a.equals(c)


def _prefix_keys(w: Workload, i: int, tokens: int, block: int) -> list[int]:
    c = w.content
    return block_keys(c.segments(i), int(c.output_ids[i]), block, tokens // block)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    probability=st.sampled_from([0.0001, 0.3, 1.0]),
    block=st.sampled_from([1, 16, 64]),
)
def test_each_call_extends_the_previous_prompt_and_answer(seed, probability, block):
    """Call k + 1's prompt keys begin with call k's prompt + answer keys; a subagent's with its
    parent's prompt + answer (its parent: the last main call before it)."""
    cfg = _cfg(
        num_sessions=4,
        calls={"kind": "uniform", "low": 1, "high": 6},
        task_tokens={"kind": "uniform", "low": 1, "high": 300},
        output_tokens={"kind": "uniform", "low": 1, "high": 200},
        tool_output_tokens={"kind": "uniform", "low": 1, "high": 300},
        fanout={
            "probability": probability,
            "children": {"kind": "uniform", "low": 1, "high": 3},
            "child_tokens": {"kind": "uniform", "low": 1, "high": 100},
            "child_output_tokens": {"kind": "uniform", "low": 1, "high": 100},
        },
    )
    w = _build(cfg, seed)
    parent: dict[int, int] = {}  # session -> its latest main call
    children = 0
    for i in range(len(w)):
        s = int(w.session_id[i])
        if w.turn[i] > 0:
            p = parent[s]
            done = int(w.prompt_tokens[p] + w.output_tokens[p])
            keys = _prefix_keys(w, i, int(w.prompt_tokens[i]), block)
            assert keys[: done // block] == _prefix_keys(w, p, done, block)
            assert w.prompt_tokens[i] > done  # and something new after it
        if w.turn[i] > 0 and w.think_s[i] == 0.0:  # a subagent (main calls think 2 s)
            children += 1
        else:
            parent[s] = i
    if probability == 1.0:  # every call but a session's last fans out
        assert children > 0 or len(w) == 4


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"fanout": {"children": {"kind": "fixed", "value": 2}, "child_tokens": {"kind": "fixed",
          "value": 1}, "child_output_tokens": {"kind": "fixed", "value": 1}}}, "probability > 0"),
        ({"system_prompt_tokens": 200, "max_prompt_tokens": 200}, "must be below"),
    ],
)  # fmt: skip
def test_config_rejects(over, message):
    with pytest.raises(ValueError, match=message):
        _cfg(**over)


def test_pin_ttl_column_survives_take_and_window_and_is_absent_without_a_hint():
    w = _build(_cfg(num_sessions=3))
    assert w.pin_ttl_s is not None and set(w.pin_ttl_s.tolist()) == {300.0}
    assert w.take(4).pin_ttl_s.tolist() == [300.0] * 4
    start = float(w.arrival_s[0])
    assert len(w.between(start, None).pin_ttl_s) == len(w)
    assert _build(_cfg(pin_ttl_s=None)).pin_ttl_s is None
    assert "pin_ttl_s" not in _build(_cfg(pin_ttl_s=None)).to_frame()


@pytest.mark.parametrize(
    ("turn", "pin", "message"),
    [
        ([0, 0, 1], None, "turn[1] = 0, expected 1"),  # one turn 0 per session
        ([0, 1, 3], None, "turn[2] = 3, expected 2"),
        ([0, 1, 1], [1.0, -1.0, 1.0], "pin_ttl_s[1] = -1.0 must be finite and ≥ 0"),
    ],
)
def test_waves_and_pin_ttl_are_checked(turn, pin, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Workload(
            np.zeros(3),
            np.full(3, 10, np.int64),
            np.full(3, 5, np.int64),
            np.zeros(3, np.int64),
            "waves",
            session_id=np.zeros(3, np.int64),
            turn=np.array(turn, np.int64),
            think_s=np.zeros(3),
            pin_ttl_s=None if pin is None else np.array(pin),
        )


def test_a_repeated_turn_is_a_wave():
    w = Workload(
        np.zeros(4), np.full(4, 10, np.int64), np.full(4, 5, np.int64), np.zeros(4, np.int64),
        "waves", session_id=np.zeros(4, np.int64), turn=np.array([0, 1, 1, 2]),
        think_s=np.array([0.0, 0.5, 0.25, 1.0]),
    )  # fmt: skip
    sessions = Sessions(w)
    assert sessions.follow_up(0) == [(1, 0.5), (2, 0.25)]
    assert list(sessions.follow_up(1)) == [] and sessions.follow_up(2) == [(3, 1.0)]


def test_every_second_call_fans_out():
    """Calls 1 and 3 (0-based) of 5 fan out: every = 2 divides k + 1; call 4 is the last."""
    fanout = _cfg().fanout.model_dump()
    w = _build(_cfg(calls={"kind": "fixed", "value": 5}, fanout={**fanout, "every": 2}))
    assert w.turn.tolist() == [0, 1, 2, 2, 3, 4, 5, 5, 6]
