"""The recorder's step rows: packed exactly, readable more than once, appendable after."""

from __future__ import annotations

import pytest

from simkv.metrics.recorder import STEP_COLUMNS, Recorder


def _row(k: int) -> tuple[float | int, ...]:
    return (0.1 * k, 0.05, *[k * 1000 + j for j in range(len(STEP_COLUMNS) - 2)])


def test_step_rows_round_trip_and_stay_appendable() -> None:
    rec = Recorder()
    rec.step(_row(1))
    rec.step(_row(2))
    first = rec.frames().steps
    assert rec.num_steps == 2
    rec.step(_row(3))  # frames() released its view of the buffer
    steps = rec.frames().steps
    assert list(steps.columns) == list(STEP_COLUMNS)
    assert steps.shape == (3, len(STEP_COLUMNS))
    assert first.equals(steps.iloc[:2])
    assert steps["time_s"].tolist() == [0.1, 0.2, 0.1 * 3]
    assert steps["evictions"].dtype.kind == "i"
    big = 2**62 + 1  # ints are stored exactly, not as doubles
    rec.step((0.0, 0.0, big, *[0] * (len(STEP_COLUMNS) - 3)))
    assert rec.frames().steps["prefill_tokens"].iloc[-1] == big


def test_a_step_row_of_the_wrong_shape_is_refused() -> None:
    rec = Recorder()
    with pytest.raises(Exception, match="pack"):
        rec.step((0.0, 0.0, 1))
    with pytest.raises(Exception, match="integer"):
        rec.step((0.0, 0.0, 1.5, *[0] * (len(STEP_COLUMNS) - 3)))
