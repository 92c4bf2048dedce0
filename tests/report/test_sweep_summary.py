"""SLOs met, the main objective, the best run and the knee, on hand-written tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from simkv.report import sweep_summary as sm


def _table(**columns: list[float]) -> pd.DataFrame:
    return pd.DataFrame({k: pd.Series(v, dtype="float64") for k, v in columns.items()})


def test_meets_slo_judges_each_set_slo_at_p99() -> None:
    nan = float("nan")
    table = _table(
        p99_ttft_ms=[900.0, 1100.0, 900.0, nan, 5000.0],
        p99_tpot_ms=[40.0, 40.0, 60.0, 40.0, 40.0],
        slo_ttft_ms=[1000.0, 1000.0, 1000.0, 1000.0, nan],
        slo_tpot_ms=[50.0, 50.0, 50.0, 50.0, nan],
    )
    # within both; TTFT over; TPOT over; no p99 (nothing finished); no SLO set at all
    assert sm.meets_slo(table).tolist() == [True, False, False, False, False]
    assert sm.has_slo(table)
    assert not sm.has_slo(table.iloc[4:])


def test_objective_and_best_row() -> None:
    table = _table(
        request_throughput=[3.0, 4.0, 4.0], request_goodput=[2.0, 3.0, 3.0],
        p99_ttft_ms=[100.0, 900.0, 400.0], slo_ttft_ms=[1000.0] * 3,
    )  # fmt: skip
    assert sm.objective(table) == sm.GOODPUT
    assert sm.best_row(table, sm.GOODPUT) == 2  # tie on goodput: the lower p99 TTFT wins
    no_slo = table.assign(slo_ttft_ms=float("nan"))
    assert sm.objective(no_slo) == sm.THROUGHPUT
    assert sm.best_row(no_slo, "absent") is None


def test_knee_meets_up_to_is_contiguous_from_the_lowest_rate() -> None:
    rates = np.array([4.0, 1.0, 2.0, 3.0, 5.0])
    rows = _table(
        p99_ttft_ms=[3000.0, 100.0, 150.0, 250.0, 900.0],  # 3 req/s departs (> 2 × 100)
        slo_ttft_ms=[1000.0] * 5,
    )
    knee = sm.knee(rates, rows, judge_slo=True)
    # 4 req/s fails; 5 req/s meets again but lies past the first failure
    assert knee == sm.Knee(meets_up_to=3.0, departs_at=3.0)
    assert sm.knee(rates, rows, judge_slo=False).meets_up_to is None
    first_fails = rows.assign(p99_ttft_ms=[3000.0, 1500.0, 150.0, 250.0, 900.0])
    assert sm.knee(rates, first_fails, judge_slo=True) == sm.Knee(None, None)
