"""MeasuredRun invariants and request_frame's checks and ordering."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simkv.errors import InputError
from simkv.measured.runs import EngineSettings, MeasuredRun, RequestColumns, request_frame


def frame(**changes) -> pd.DataFrame:
    data = {"arrival_s": [0.0, 1.0], "prompt_tokens": np.array([3, 4], np.int64),
            "output_tokens": np.array([2, 2], np.int64), "ttft_s": [0.1, 0.2],
            "e2el_s": [0.3, 0.4]} | changes  # fmt: skip
    return pd.DataFrame(data)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"arrival_s": [0.5, 1.0]}, "start at 0.0"),
        ({"arrival_s": [0.0, -1.0]}, "non-decreasing"),
        ({"output_tokens": np.array([0, 2], np.int64)}, "≥ 1"),
        ({"e2el_s": [0.05, 0.4]}, "ttft_s ≤ e2el_s"),
    ],
)
def test_invariants(changes, match):
    with pytest.raises(ValueError, match=match):
        MeasuredRun(Path("x"), "x", frame(**changes))


def test_token_ids_must_match_prompt_lengths():
    with pytest.raises(ValueError, match="prompt_token_ids"):
        MeasuredRun(Path("x"), "x", frame(), prompt_token_ids=(np.arange(3), np.arange(3)))
    MeasuredRun(Path("x"), "x", frame(ttft_s=[np.nan, np.nan]))  # not recorded: allowed


def test_request_frame_sorts_stably_and_rebases():
    cols = RequestColumns(
        Path("m.csv"), np.array([2, 3, 4]), {}, np.array([5.0, 4.0, 5.0]),
        np.array([1, 2, 3]), np.array([1, 1, 1]), np.array([0.1, 0.2, 0.3]),
        np.array([0.1, 0.2, 0.3]),
    )  # fmt: skip
    out, order = request_frame(cols)
    assert order.tolist() == [1, 0, 2]
    assert out["arrival_s"].tolist() == [0.0, 1.0, 1.0]
    assert "first_scheduled_s" not in out


def test_request_frame_names_the_file_field():
    cols = RequestColumns(
        Path("m.jsonl"), np.array([7]), {"ttft_s": "first_token_ts"}, np.array([1.0]),
        np.array([1]), np.array([1]), np.array([-0.5]), np.array([1.0]),
    )  # fmt: skip
    with pytest.raises(InputError, match="clock skew") as info:
        request_frame(cols)
    assert (info.value.file, info.value.line, info.value.field) == ("m.jsonl", 7, "first_token_ts")


def test_engine_settings_field_types():
    types = EngineSettings.field_types()
    assert types["max_num_seqs"] is int and types["enable_prefix_caching"] is bool
    assert types["model"] is str
