"""The report's Distributions section: every panel drawn from hand-built frames, outliers
clipped with a count, and panels without samples left out with a note."""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
import pandas as pd

from simkv.report import distribution_figures as df
from simkv.report import figures as fg
from simkv.report.conventions import Drawn, text_overlaps


def _steps(preempted: list[int]) -> pd.DataFrame:
    n = len(preempted)
    return pd.DataFrame({
        "time_s": np.arange(n) * 0.1, "duration_s": np.full(n, 0.02),
        "batch_size": np.arange(n) % 4 + 1, "prefill_tokens": np.zeros(n, dtype=np.int64),
        "decode_tokens": np.arange(n) % 4 + 1, "preempted": preempted,
    })  # fmt: skip


def _requests() -> pd.DataFrame:
    return pd.DataFrame({
        "arrival_s": [0.0, 0.5, 1.0, 3.0], "first_scheduled_s": [0.1, 0.5, np.nan, 3.2],
        "finish_s": [2.1, 1.5, np.nan, 4.2], "status": ["finished", "finished", "rejected",
        "finished"], "generated_tokens": [10, 5, 0, 20], "prompt_tokens": [8, 16, 9000, 4],
        "output_tokens": [10, 5, 30, 20],
    })  # fmt: skip


def _titles(drawn: Drawn) -> list[str]:
    return [ax.get_title(loc="left") for ax in drawn.figure.axes if ax.get_visible()]


def test_step_panels_and_the_preemption_cdf_appear_only_with_preemptions() -> None:
    with mpl.rc_context(dict(fg.REPORT_RC)):
        calm = df.step_distributions(_steps([0] * 8))
        busy = df.step_distributions(_steps([0, 2, 0, 1, 0, 0, 0, 0]))
    assert len(_titles(calm)) == 3 and len(_titles(busy)) == 4
    xlabels = [ax.get_xlabel() for ax in busy.figure.axes]
    assert "simulated time of preemption (s)" in xlabels and "step time (ms)" in xlabels
    # the preemption CDF counts each preemption: 2 at 0.1 s, 1 at 0.3 s, so p50 is 0.1 s
    assert _titles(busy)[3].startswith("p50 0.1 s,")
    assert text_overlaps(busy.figure) == []


def test_latency_panels_are_per_request_cdfs() -> None:
    with mpl.rc_context(dict(fg.REPORT_RC)):
        drawn = df.latency_distributions(_requests())
    queue, per_token = drawn.figure.axes[:2]
    x, y = per_token.lines[0].get_data()
    # E2E per generated token (ms): 2.1 s / 10, 1.0 s / 5, 1.2 s / 20; the rejected one is out
    assert sorted(set(np.round(x, 6))) == [60.0, 200.0, 210.0] and y[-1] == 1.0
    assert round(queue.lines[0].get_data()[0].max(), 6) == 200.0  # the 3.0 → 3.2 s wait


def test_an_outlier_is_clipped_and_counted_and_empty_panels_are_noted() -> None:
    requests = pd.concat([_requests()] * 50, ignore_index=True)
    requests.loc[0, "prompt_tokens"] = 10**6
    with mpl.rc_context(dict(fg.REPORT_RC)):
        drawn = df.workload_distributions(requests)
        lonely = df.workload_distributions(requests.head(1))
    assert "beyond the axis" in _titles(drawn)[0]
    assert drawn.figure.axes[0].get_xlim()[1] < 10**5
    assert lonely.notes == ("inter-arrival time: no samples in this run (panel left out)",)
