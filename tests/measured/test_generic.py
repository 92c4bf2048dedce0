"""The generic measurement CSV: round trip and bad input."""

from __future__ import annotations

import pandas as pd
import pytest

from simkv.errors import InputError
from simkv.measured import read_measured_run, write_generic_csv
from simkv.metrics.measured import measured_metrics

HEADER = "arrival_s,prompt_tokens,output_tokens,ttft_s,e2el_s\n"


def test_round_trip_of_a_bundled_run(rtx4090, tmp_path):
    path = write_generic_csv(rtx4090, tmp_path / "rtx4090.csv")
    back = read_measured_run(path)
    assert back.label == "rtx4090" and back.engine is None and back.prompt_token_ids is None
    pd.testing.assert_frame_equal(back.requests, rtx4090.requests)
    assert measured_metrics(back) == measured_metrics(rtx4090)


def test_rows_are_sorted_and_rebased(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(HEADER + "12.5,10,3,0.5,1.0\n10.0,20,2,0.25,0.75\n")
    req = read_measured_run(path).requests
    assert req["arrival_s"].tolist() == [0.0, 2.5]
    assert req["prompt_tokens"].tolist() == [20, 10]
    assert "first_scheduled_s" not in req.columns


def test_optional_first_scheduled_and_jsonl(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"arrival_s": 3, "prompt_tokens": 5, "output_tokens": 2, "ttft_s": 0.5, '
                    '"e2el_s": 0.7, "first_scheduled_s": 3.25}\n')  # fmt: skip
    req = read_measured_run(path).requests
    assert req["first_scheduled_s"].tolist() == [0.25]


def fails(text, *, line, field, match, tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=match) as info:
        read_measured_run(path)
    assert (info.value.file, info.value.line, info.value.field) == (str(path), line, field)


def test_unknown_format(tmp_path):
    fails("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n", line=1, field="arrival_s",
          match="unknown measurement format", tmp_path=tmp_path)  # fmt: skip


def test_non_numeric(tmp_path):
    fails(HEADER + "0,10,3,0.5,1.0\n1,10,3,soon,1.0\n", line=3, field="ttft_s",
          match="not a number", tmp_path=tmp_path)  # fmt: skip


def test_missing_value(tmp_path):
    fails(HEADER + "0,10,3,0.5,\n", line=2, field="e2el_s", match="missing", tmp_path=tmp_path)


def test_clock_skew(tmp_path):
    fails(HEADER + "0,10,3,0.5,1.0\n1,10,3,0.5,0.4\n", line=3, field="e2el_s",
          match="last token before first", tmp_path=tmp_path)  # fmt: skip
    fails(HEADER + "0,10,3,-0.1,1.0\n", line=2, field="ttft_s",
          match="first token before arrival", tmp_path=tmp_path)  # fmt: skip


def test_zero_output(tmp_path):
    fails(HEADER + "0,10,0,0.5,1.0\n", line=2, field="output_tokens", match="zero output",
          tmp_path=tmp_path)  # fmt: skip


def test_empty_file(tmp_path):
    (tmp_path / "m.csv").write_text("")
    with pytest.raises(InputError, match="empty"):
        read_measured_run(tmp_path / "m.csv")
    (tmp_path / "h.csv").write_text(HEADER)
    with pytest.raises(InputError, match="empty"):
        read_measured_run(tmp_path / "h.csv")
