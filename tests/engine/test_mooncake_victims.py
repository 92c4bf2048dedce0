"""The shipped Mooncake trace under every victim policy ends (issue 15's "51 of 59 requests
finish, then 1.1 M steps without progress").

The hang reproduces with the trace's first 59 requests (``end_s: 17``), a KV cache just above one
``max_model_len`` request (7.5 GiB), no prefix caching and prefill chunks of 512 tokens: under the
``longest`` (or ``oldest``) victim without the vllm_v1 hold, the longest prompts preempt each
other forever (the code before the hold: 24 of 59 finished, then no progress). With the hold every
request finishes; without it the progress guarantee ends the run with one line (``make fuzz``).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from simkv.cli import app
from simkv.engine.progress import SimulationStalled
from simkv.run import load_config
from simkv.workload.build import build_workload
from simkv.workload.request import Workload
from tests.conftest import ROOT
from tests.engine.helpers import build_engine

CONFIG = ROOT / "configs" / "mooncake.yaml"
TIGHT = ["workload.end_s=17", "kv_cache.capacity_gib=7.5", "kv_cache.prefix_caching=none"]
V1 = [*TIGHT, "scheduler.kind=vllm_v1", "scheduler.long_prefill_token_threshold=512"]
V0 = [*TIGHT, "scheduler.kind=vllm_v0"]
VICTIMS = ["newest", "oldest", "longest", "fewest_blocks"]
REQUESTS = 59
runner = CliRunner()
HANG_GUARD_S = 600  # ends a hanging run (the test then fails); not a timing assertion


class _Hung(Exception):
    pass


def _hang(_signum: int, _frame: object) -> None:
    raise _Hung(f"the run did not end within {HANG_GUARD_S} s")


@pytest.fixture(scope="module")
def workload() -> Workload:
    cfg = load_config(CONFIG, V1)
    built = build_workload(cfg.workload, np.random.default_rng(cfg.seed), CONFIG.parent)
    assert len(built.arrival_s) == REQUESTS
    return built


def _run(sets: list[str], workload: Workload, hold: bool = True) -> int:
    """Requests finished by the run; :class:`SimulationStalled` if it cannot end."""
    engine, _ = build_engine(load_config(CONFIG, sets), CONFIG.parent, workload=workload)
    if not hold:
        engine.scheduler._held = None  # type: ignore[attr-defined]  # the policy before the hold
    previous = signal.signal(signal.SIGALRM, _hang)
    signal.alarm(HANG_GUARD_S)
    try:
        engine.run()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return engine.recorder.num_done


@pytest.mark.parametrize("sets", [V1, V0], ids=["vllm_v1", "vllm_v0"])
@pytest.mark.parametrize("victim", VICTIMS)
def test_every_victim_finishes_the_tight_mooncake_run(
    sets: list[str], victim: str, workload: Workload
) -> None:
    assert _run([*sets, f"preemption.victim={victim}"], workload) == REQUESTS


def test_longest_victim_through_the_cli(tmp_path: Path) -> None:
    args = ["run", str(CONFIG), "--out", str(tmp_path / "out")]
    for item in [*V1, "preemption.victim=longest"]:
        args += ["--set", item]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["completed"] == REQUESTS and summary["preemptions"] > 0


@pytest.mark.fuzz
@pytest.mark.parametrize("victim", ["longest", "oldest"])
def test_without_the_hold_the_run_ends_with_the_livelock_error(
    victim: str, workload: Workload
) -> None:
    """The reproduction: the policy as it was livelocks; the guard ends it (~10 s a run)."""
    with pytest.raises(SimulationStalled, match=r"^livelock at t=.*preemption\.victim: newest$"):
        _run([*V1, f"preemption.victim={victim}"], workload, hold=False)
