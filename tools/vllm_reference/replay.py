"""The same scenarios in simkv, and the step-by-step comparison with a real vLLM's log.

A scenario becomes a simkv run of the ``vllm_v1`` scheduler: the requests as a workload with
exact prompt content (token ids, :func:`simkv.workload.token_content.content_from_token_ids`),
arriving at ``step`` seconds, and a cost model in which every step takes exactly one second,
so simulated time is the step clock of :mod:`scenario` (an idle engine wakes at the next
arrival; a step that only preempted takes no time). The engine runs with invariants checked
and without the decode lane, and each ``schedule()`` call is logged as the recorder logs it on
the real side: ``[{request: tokens}, [preempted], free blocks, waiting, running]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simkv.config.sim import SimConfig
from simkv.engine.request.plan import StepPlan
from simkv.run import build
from simkv.workload.request import Workload
from simkv.workload.token_content import content_from_token_ids
from tools.vllm_reference.scenario import Scenario

Step = list[Any]  # [{request: tokens}, [preempted requests], free blocks, waiting, running]


def simkv_config(scenario: Scenario, vllm_version: str, table: Path) -> SimConfig:
    """The run config of ``scenario`` (``table``: a step-time CSV of one second a step)."""
    knobs = scenario.engine
    document = {
        "name": scenario.name,
        "workload": {  # a stand-in: the run takes the scenario's requests (workload())
            "kind": "synthetic",
            "num_requests": 1,
            "arrival": {"kind": "poisson", "rate": 1},
            "prompt_tokens": {"kind": "fixed", "value": 1},
            "output_tokens": {"kind": "fixed", "value": 1},
        },
        "model": {"preset": "llama-2-7b", "max_model_len": knobs.max_model_len},
        "gpu": "a100-80gb",
        "kv_cache": {
            "block_size": knobs.block_size,
            "num_blocks": knobs.num_blocks,
            "prefix_caching": "hash" if knobs.enable_prefix_caching else "none",
        },
        "scheduler": {
            "kind": "vllm_v1",
            "max_num_seqs": knobs.max_num_seqs,
            "max_num_batched_tokens": knobs.max_num_batched_tokens,
            "enable_chunked_prefill": knobs.enable_chunked_prefill,
            "policy": knobs.policy,
            "long_prefill_token_threshold": knobs.long_prefill_token_threshold,
            "reserve_full_prompt": knobs.reserve_full_isl,
            "vllm_version": vllm_version,
            "async_scheduling": knobs.async_scheduling,
        },
        "cost_model": {"kind": "table", "path": str(table)},
    }
    return SimConfig.model_validate(document)


def workload(scenario: Scenario) -> Workload:
    """The scenario's requests, arriving at their step (seconds), with exact prompt content."""
    requests = scenario.requests
    prompts = [np.asarray(r.prompt, np.int64) for r in requests]
    return Workload(
        np.array([r.step for r in requests], np.float64),
        np.array([len(r.prompt) for r in requests], np.int64),
        np.array([r.output for r in requests], np.int64),
        np.array([r.priority for r in requests], np.int64),
        scenario.name,
        content_from_token_ids(prompts),
    )


def one_second_table(folder: Path) -> Path:
    """A step table in which every step takes 1000 ms."""
    path = folder / "one-second-steps.csv"
    path.write_text("num_tokens,step_time_ms\n1,1000\n100000,1000\n")
    return path


def simulate(scenario: Scenario, vllm_version: str, folder: Path) -> list[Step]:
    """Run ``scenario`` in simkv; the log of its ``schedule()`` calls."""
    cfg = simkv_config(scenario, vllm_version, one_second_table(folder))
    run = build(cfg, folder, workload=workload(scenario), check_invariants=True,
                fast_forward=False)  # fmt: skip
    engine = run.engine
    scheduler = engine.scheduler
    schedule = scheduler.schedule
    log: list[Step] = []

    def logged(now: float) -> StepPlan:
        before = {seq: seq.preemptions for seq in scheduler.running}
        plan = schedule(now)
        scheduled = {str(seq.req_id): n for seq, n in zip(plan.seqs, plan.num_new, strict=True)}
        preempted = sorted(s.req_id for s, n in before.items() if s.preemptions > n)
        state = scheduler.step_state()
        log.append([scheduled, preempted, state.blocks_free, len(scheduler.waiting),
                    len(scheduler.running)])  # fmt: skip
        return plan

    scheduler.schedule = logged  # type: ignore[method-assign]
    engine.run()
    return log


@dataclass(frozen=True)
class Divergence:
    """The first step at which the two logs differ (``None`` fields: that side has ended)."""

    step: int
    real: Step | None
    simkv: Step | None

    def describe(self) -> str:
        def side(entry: Step | None) -> str:
            if entry is None:
                return "ended"
            scheduled, preempted, free, waiting, running = entry
            return (f"scheduled {scheduled} preempted {preempted} free {free} "
                    f"waiting {waiting} running {running}")  # fmt: skip

        return f"step {self.step}: vLLM {side(self.real)}; simkv {side(self.simkv)}"


def _work(log: list[Step]) -> list[Step]:
    """The calls that scheduled or preempted something (idle calls are not steps)."""
    return [entry for entry in log if entry[0] or entry[1]]


def compare(real: list[Step], simkv: list[Step]) -> Divergence | None:
    """The first step whose scheduled (request, tokens) pairs or preempted set differ."""
    a, b = _work(real), _work(simkv)
    for k in range(max(len(a), len(b))):
        x = a[k] if k < len(a) else None
        y = b[k] if k < len(b) else None
        if x is None or y is None or x[0] != y[0] or sorted(x[1]) != sorted(y[1]):
            return Divergence(k, x, y)
    return None
