"""The recorder's step rows: packed exactly, readable more than once, appendable after."""

from __future__ import annotations

import pytest

from simkv.metrics.recorder import STEP_COLUMNS, STEP_PLAN_COLUMNS, Recorder, StepState


def _step(rec: Recorder, values: tuple[float | int, ...]) -> None:
    """Record ``values`` given in recorded order (plan counts, then the state)."""
    k = len(STEP_PLAN_COLUMNS)
    rec.step(*values[:k], StepState._make(values[k:]))  # type: ignore[arg-type]


def _row(k: int) -> tuple[float | int, ...]:
    return (0.1 * k, 0.05, *[k * 1000 + j for j in range(len(STEP_COLUMNS) - 2)])


def test_step_rows_round_trip_and_stay_appendable() -> None:
    rec = Recorder()
    _step(rec, _row(1))
    _step(rec, _row(2))
    first = rec.frames().steps
    assert rec.num_steps == 2
    _step(rec, _row(3))  # frames() released its view of the buffer
    steps = rec.frames().steps
    assert list(steps.columns) == list(STEP_COLUMNS)
    assert steps.shape == (3, len(STEP_COLUMNS))
    assert first.equals(steps.iloc[:2])
    assert steps["time_s"].tolist() == [0.1, 0.2, 0.1 * 3]
    assert steps["evictions"].dtype.kind == "i"
    big = 2**62 + 1  # ints are stored exactly, not as doubles
    _step(rec, (0.0, 0.0, big, *[0] * (len(STEP_COLUMNS) - 3)))
    assert rec.frames().steps["prefill_tokens"].iloc[-1] == big


def test_a_step_row_of_the_wrong_shape_is_refused() -> None:
    rec = Recorder()
    with pytest.raises(TypeError):
        _step(rec, (0.0, 0.0, 1))
    with pytest.raises(Exception, match="integer"):
        _step(rec, (0.0, 0.0, 1.5, *[0] * (len(STEP_COLUMNS) - 3)))
    assert rec.num_steps == 0
