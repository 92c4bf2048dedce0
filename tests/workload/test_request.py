import dataclasses

import numpy as np
import pytest

from simkv.workload.content import PromptContent
from simkv.workload.request import Request, Workload


def small() -> Workload:
    return Workload.from_arrays(
        [0.5, 1.0, 1.0, 2.0, 3.5],
        [10, 20, 30, 40, 50],
        [1, 2, 3, 4, 5],
        [0, 1, 0, 2, 0],
        source="test",
    )


def test_request_is_frozen_with_default_priority():
    req = Request(3, 1.5, 100, 20)
    assert req.priority == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.prompt_tokens = 5  # type: ignore[misc]
    assert not hasattr(req, "__dict__")


def test_len_request_iter_and_frame():
    w = small()
    assert len(w) == 5
    assert w.request(3) == Request(3, 2.0, 40, 4, 2)
    assert list(w)[1] == Request(1, 1.0, 20, 2, 1)
    assert [r.req_id for r in w] == [0, 1, 2, 3, 4]
    frame = w.to_frame()
    assert list(frame.columns) == [
        "req_id",
        "arrival_s",
        "prompt_tokens",
        "output_tokens",
        "priority",
    ]
    assert frame["prompt_tokens"].tolist() == [10, 20, 30, 40, 50]
    assert frame["req_id"].tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(IndexError):
        w.request(5)


def test_iteration_crosses_chunk_boundary():
    n = 70_000
    w = Workload.from_arrays(np.arange(n) * 0.1, np.ones(n), np.full(n, 2), source="big")
    reqs = list(w)
    assert len(reqs) == n
    assert reqs[65_536] == Request(65_536, 6553.6, 1, 2, 0)
    assert all(r.req_id == i for i, r in enumerate(reqs[65_530:65_540], start=65_530))


def test_columns_are_read_only_views_and_callers_arrays_stay_writeable():
    arrivals = np.array([0.0, 1.0])
    w = Workload(arrivals, np.array([1, 2]), np.array([3, 4]), np.array([0, 0]), "x")
    with pytest.raises(ValueError):
        w.arrival_s[0] = 5.0
    arrivals[1] = 2.0  # still writeable by its owner (the view shares memory)
    assert arrivals.flags.writeable


def test_one_million_requests_stay_small():
    n = 1_000_000
    w = Workload.from_arrays(np.arange(n, dtype=float), np.ones(n), np.ones(n), source="1M")
    total = sum(
        getattr(w, c).nbytes for c in ("arrival_s", "prompt_tokens", "output_tokens", "priority")
    )
    assert total == 32_000_000


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"arrival_s": np.array([0, 1])}, "dtype float64"),
        ({"prompt_tokens": np.array([1.0, 2.0])}, "dtype int64"),
        ({"output_tokens": np.array([1, 2, 3])}, "output_tokens has 3 values"),
        ({"priority": np.zeros((2, 1), np.int64)}, "1-D"),
        ({"arrival_s": np.array([1.0, 0.5])}, "non-decreasing"),
        ({"arrival_s": np.array([-1.0, 0.5])}, "arrival_s[0] = -1.0 must be finite"),
        ({"arrival_s": np.array([0.0, np.nan])}, "arrival_s[1]"),
        ({"prompt_tokens": np.array([1, 0])}, "prompt_tokens[1] = 0 must be ≥ 1"),
        ({"output_tokens": np.array([-2, 1])}, "output_tokens[0] = -2"),
    ],
)
def test_invalid_columns_raise_value_error(kwargs, message):
    columns = {
        "arrival_s": np.array([0.0, 1.0]),
        "prompt_tokens": np.array([1, 2]),
        "output_tokens": np.array([1, 2]),
        "priority": np.array([0, 0]),
    }
    columns.update(kwargs)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Workload(**columns, source="bad")


def test_empty_workload_is_allowed():
    w = Workload.from_arrays([], [], [], source="empty")
    assert len(w) == 0
    assert list(w) == []
    assert w.mean_rate_per_s is None


def test_take_between_and_time_scaled():
    w = small()
    assert w.take(2).arrival_s.tolist() == [0.5, 1.0]
    assert w.take(99).prompt_tokens.tolist() == [10, 20, 30, 40, 50]
    window = w.between(1.0, 3.5)
    assert window.arrival_s.tolist() == [0.0, 0.0, 1.0]
    assert window.prompt_tokens.tolist() == [20, 30, 40]
    assert window.priority.tolist() == [1, 0, 2]
    assert w.between(None, 1.0).arrival_s.tolist() == [0.5]
    assert w.between(2.0, None).arrival_s.tolist() == [0.0, 1.5]
    assert len(w.between(10.0, 20.0)) == 0
    assert w.time_scaled(2.0).arrival_s.tolist() == [1.0, 2.0, 2.0, 4.0, 7.0]
    with pytest.raises(ValueError):
        w.time_scaled(0.0)


def test_mean_rate_is_gaps_over_span():
    assert small().mean_rate_per_s == pytest.approx(4 / 3.0)
    same_instant = Workload.from_arrays([1.0, 1.0], [1, 1], [1, 1], source="tie")
    assert same_instant.mean_rate_per_s is None


def chat() -> Workload:
    """Two sessions (ids 4 and 9) of 3 and 2 turns, session 9 arriving at 1.0 s."""
    prompts = [
        [(0, 5)],
        [(0, 5), (1, 2), (2, 3)],
        [(0, 5), (1, 2), (2, 3), (3, 1), (4, 1)],
        [(6, 4)],
        [(6, 4), (7, 1), (8, 2)],
    ]
    content = PromptContent.from_lists(prompts, [1, 3, 5, 7, 9])
    return Workload.from_arrays(
        [0.5, 0.5, 0.5, 1.0, 1.0],
        [5, 10, 12, 4, 7],
        [2, 1, 3, 1, 4],
        source="chat",
        content=content,
        session_id=[4, 4, 4, 9, 9],
        turn=[0, 1, 2, 0, 1],
        think_s=[0.0, 1.5, 2.5, 0.0, 3.0],
    )


def test_optional_columns_default_to_none():
    w = small()
    assert (w.content, w.session_id, w.turn, w.think_s) == (None, None, None, None)


def test_session_columns_are_typed_read_only_views():
    w = chat()
    assert w.session_id.dtype == np.int64 and w.think_s.dtype == np.float64
    with pytest.raises(ValueError):
        w.turn[0] = 3


def test_take_keeps_leading_turns_of_a_cut_session():
    w = chat().take(4)
    assert w.session_id.tolist() == [4, 4, 4, 9]
    assert w.turn.tolist() == [0, 1, 2, 0]
    assert w.think_s.tolist() == [0.0, 1.5, 2.5, 0.0]
    assert w.content.segments(3) == [(6, 4)]
    assert w.content.output_ids.tolist() == [1, 3, 5, 7]
    assert w.content.offsets.tolist() == [0, 1, 4, 9, 10]


def test_between_keeps_whole_sessions_and_time_scaled_keeps_think():
    w = chat().between(0.75, None)
    assert w.arrival_s.tolist() == [0.25, 0.25]
    assert w.session_id.tolist() == [9, 9]
    assert w.turn.tolist() == [0, 1]
    assert [w.content.segments(i) for i in range(2)] == [[(6, 4)], [(6, 4), (7, 1), (8, 2)]]
    assert w.content.output_ids.tolist() == [7, 9]
    assert len(chat().between(0.6, 0.9)) == 0
    scaled = chat().time_scaled(2.0)
    assert scaled.arrival_s.tolist() == [1.0, 1.0, 1.0, 2.0, 2.0]
    assert scaled.think_s.tolist() == [0.0, 1.5, 2.5, 0.0, 3.0]
    assert scaled.content.segments(4) == [(6, 4), (7, 1), (8, 2)]
    assert scaled.turn.tolist() == [0, 1, 2, 0, 1]


def test_frame_carries_session_and_content_columns():
    frame = chat().to_frame()
    assert list(frame.columns) == [
        "req_id",
        "arrival_s",
        "prompt_tokens",
        "output_tokens",
        "priority",
        "session_id",
        "turn",
        "think_s",
        "segments",
        "output_id",
    ]
    assert frame["segments"][1] == [(0, 5), (1, 2), (2, 3)]
    assert frame["output_id"].tolist() == [1, 3, 5, 7, 9]
    assert frame["turn"].tolist() == [0, 1, 2, 0, 1]


def rebuilt(**changes) -> str:
    """The ValueError message of ``chat()`` rebuilt with ``changes``."""
    w = chat()
    columns = {
        "arrival_s": w.arrival_s,
        "prompt_tokens": w.prompt_tokens,
        "output_tokens": w.output_tokens,
        "priority": w.priority,
        "source": "bad",
        "content": w.content,
        "session_id": w.session_id,
        "turn": w.turn,
        "think_s": w.think_s,
    }
    columns.update(changes)
    with pytest.raises(ValueError) as err:
        Workload(**columns)
    return str(err.value)


def test_content_must_match_prompt_lengths():
    assert rebuilt(prompt_tokens=np.array([5, 10, 13, 4, 7])) == (
        "content of request 2: segments sum to 12 tokens, prompt_tokens[2] = 13"
    )
    short = PromptContent.from_lists([[(0, 5)]], [1])
    assert rebuilt(content=short) == "content must be a PromptContent of 5 requests"
    negative = PromptContent.from_lists(
        [[(0, 5)], [(-1, 10)], [(2, 12)], [(3, 4)], [(4, 7)]], range(5)
    )
    assert "content ids must be ≥ 0" in rebuilt(content=negative)
    empty = PromptContent.from_lists([[(0, 5)], [], [(2, 12)], [(3, 4)], [(4, 7)]], range(5))
    assert rebuilt(content=empty) == "content of request 1 has no segments"


def test_session_validation():
    assert rebuilt(turn=np.array([0, 2, 1, 0, 1])) == (
        "turn[1] = 2, expected 1: the turns of session 4 must be 0, 1, 2, ... in array order"
    )
    assert rebuilt(turn=np.array([0, 1, 2, 1, 0])).startswith("turn[3] = 1, expected 0")
    assert rebuilt(session_id=np.array([4, 4, 9, 9, 9])).startswith("turn[2] = 2, expected 0")
    assert "give all three or none" in rebuilt(think_s=None)
    assert "give all three or none" in rebuilt(session_id=None, turn=None)
    assert (
        rebuilt(think_s=np.array([0.0, -1.0, 0, 0, 0]))
        == "think_s[1] = -1.0 must be finite and ≥ 0"
    )
    assert (
        rebuilt(turn=np.array([0, 1, 2, 0, 1], np.int32)) == "turn must have dtype int64, got int32"
    )
    assert rebuilt(arrival_s=np.array([0.5, 0.5, 0.75, 1.0, 1.0])) == (
        "arrival_s[2] = 0.75 must equal its session's turn-0 arrival_s[0] = 0.5"
    )
