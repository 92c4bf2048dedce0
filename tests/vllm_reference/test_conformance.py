"""simkv's ``vllm_v1`` against a real vLLM, step by step, without installing vLLM.

``fixtures/`` holds random scenarios (``tools/vllm_reference/scenario.py``, seeds 0–119, and
seeds 0–59 again with async scheduling) and the step log a real vLLM 0.32.0 (the CPU build,
``make vllm-reference``) recorded for each: per ``schedule()`` call, the tokens scheduled per
request and the requests preempted. Each is replayed through simkv with ``vllm_version:
"0.32"`` and compared call by call.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import pytest

from tools.vllm_reference.conformance import check, generate
from tools.vllm_reference.replay import compare, simulate
from tools.vllm_reference.scenario import Scenario, random_scenario, read_jsonl_gz

FIXTURES = Path(__file__).parent / "fixtures"
SCENARIOS = FIXTURES / "scenarios.jsonl.gz"
LOG = FIXTURES / "vllm-0.32.0.jsonl.gz"


def _records() -> list[dict[str, object]]:
    return list(read_jsonl_gz(LOG))


def test_the_fixtures_are_the_generators_scenarios_of_a_real_vllm_0_32() -> None:
    head, *records = _records()
    assert head["versions"]["vllm"] == "0.32.0"  # type: ignore[index]
    assert len(records) >= 100
    stored = [Scenario.from_json(s) for s in read_jsonl_gz(SCENARIOS)]
    assert stored == generate("0:120", "0:60")
    assert {str(r["name"]) for r in records} == {s.name for s in stored}


def test_every_recorded_scenario_is_identical_step_by_step() -> None:
    result = check(SCENARIOS, LOG, "0.32")
    differing = [
        f"{o.scenario.name} ({o.scenario.family}): {o.divergence.describe()}"
        for o in result.outcomes
        if o.divergence is not None
    ]
    assert not differing, "\n".join(differing)
    # the set exercises what it claims to: preemptions, every family
    assert sum(o.preemptions for o in result.outcomes) >= 50
    assert {o.scenario.family for o in result.outcomes} >= {"preempt", "priority", "long"}
    assert sum(o.scenario.engine.async_scheduling for o in result.outcomes) == 60


def test_vllm_0_11_rules_differ_from_the_recorded_0_32_engine() -> None:
    """The fixtures tell the releases apart: under 0.11's rules (the threshold always
    applies) some scenarios diverge, so a broken 0.32 rule cannot pass unnoticed."""
    result = check(SCENARIOS, LOG, "0.11")
    assert result.identical < len(result.outcomes)


def test_the_comparer_reports_the_first_step_that_differs() -> None:
    scenarios = {s["name"]: Scenario.from_json(s) for s in read_jsonl_gz(SCENARIOS)}
    record = next(r for r in _records()[1:] if len(r["steps"]) > 5)  # type: ignore[arg-type]
    scenario = scenarios[record["name"]]
    with tempfile.TemporaryDirectory() as folder:
        ours = simulate(scenario, "0.32", Path(folder))
    real = record["steps"]
    assert compare(real, ours) is None  # type: ignore[arg-type]
    changed = copy.deepcopy(real)
    scheduled = changed[3][0]  # type: ignore[index]
    request = next(iter(scheduled))
    scheduled[request] += 1
    divergence = compare(changed, ours)  # type: ignore[arg-type]
    assert divergence is not None and divergence.step == 3
    assert compare(real[:-1], ours) is not None  # type: ignore[index]
    preempting = copy.deepcopy(real)
    preempting[0][1].append(999)  # type: ignore[index]
    assert compare(preempting, ours) is not None  # type: ignore[arg-type]


@pytest.mark.parametrize(("seed", "asynchronous"), [(0, False), (5, True), (12, False)])
def test_a_scenario_round_trips_through_json(seed: int, asynchronous: bool) -> None:
    scenario = random_scenario(seed, async_scheduling=asynchronous)
    assert Scenario.from_json(scenario.to_json()) == scenario
