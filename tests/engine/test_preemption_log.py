"""The preemption log: a row per preemption, its times filled in as the request comes back."""

from __future__ import annotations

import math

import pytest

from simkv.engine.preemption_log import PreemptionLog
from simkv.engine.request.seq import Seq
from simkv.kv.allocator import InvariantViolation
from simkv.metrics.recorder import Recorder


def test_rows_get_their_resume_and_next_token_times() -> None:
    recorder = Recorder()
    log = PreemptionLog(recorder)
    a, b = Seq(0, 0.0, 8, 4, 0, 4), Seq(1, 0.0, 8, 4, 0, 4)
    log.preempted(a, 1.0, swap=False)
    log.preempted(b, 1.0, swap=True)
    log.resumed(a, 2.0)
    log.sampled(2.5)  # a has sampled nothing yet (its recompute prefill goes on)
    a.num_output += 1
    log.sampled(3.0)
    log.resumed(b, 3.0)
    log.preempted(b, 4.0, swap=True)  # again, before its next token
    assert not log.awaiting
    rows = recorder.frames().preemptions
    assert rows is not None
    assert list(rows["req_id"]) == [0, 1, 1] and list(rows["kind"]) == ["recompute", "swap", "swap"]
    assert list(rows["time_s"]) == [1.0, 1.0, 4.0]
    assert list(rows["resumed_s"][:2]) == [2.0, 3.0] and math.isnan(rows["resumed_s"][2])
    assert rows["next_token_s"][0] == 3.0 and rows["next_token_s"][1:].isna().all()


def test_coming_back_without_a_preemption_is_an_invariant_violation() -> None:
    log = PreemptionLog(Recorder())
    with pytest.raises(InvariantViolation, match="never preempted"):
        log.resumed(Seq(0, 0.0, 8, 4, 0, 4), 1.0)
