"""Each paged scheduler's one-call ``step_state`` equals the generic composition of
``queue_lengths``, ``memory_state``, ``kv_slots``, ``cache_state`` and ``fork_state``."""

from __future__ import annotations

from pathlib import Path

import pytest

from simkv.engine.scheduler import SchedulerBase
from simkv.runner import build_engine
from tests.engine.test_fastforward import _config


@pytest.mark.parametrize(
    ("kind", "caching", "mode"),
    [("vllm_v1", "hash", "recompute"), ("vllm_v1", "none", "recompute"),
     ("vllm_v0", "none", "swap")],
)  # fmt: skip
def test_step_state_matches_its_parts(
    kind: str, caching: str, mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _config(7, 6.0, 1600, 16, caching, 2048, 60, 120, kind, "newest", mode)
    engine, _ = build_engine(cfg, tmp_path)
    checked: list[int] = []
    sched = engine.scheduler
    one_call = sched.step_state

    def checking() -> tuple[int, ...]:  # what every step row records, checked
        state = one_call()
        assert state == SchedulerBase.step_state(sched)  # type: ignore[arg-type]
        checked.append(1)
        return state

    monkeypatch.setattr(sched, "step_state", checking)
    engine.run()
    steps = engine.recorder.frames().steps
    assert len(checked) == len(steps) > 500
    assert steps["preempted"].sum() > 0
    if mode == "swap":
        assert steps["cpu_blocks_used"].max() > 0
