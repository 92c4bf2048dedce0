"""Conservation on random small workloads, for every scheduler: invariants after every step,
and at the end every block is free and every request finished or was turned away with a reason.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simkv.engine.memory.contiguous import ContiguousKV
from simkv.engine.memory.paged import PagedKV
from tests.engine.helpers import build_engine, tiny_config

SCHEDULERS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"kind": "vllm_v1"}, {}),
    ({"kind": "vllm_v1", "max_num_batched_tokens": 5, "long_prefill_token_threshold": 3}, {}),
    ({"kind": "vllm_v1", "policy": "priority"}, {"victim": "lowest_priority"}),
    ({"kind": "vllm_v1"}, {"victim": "oldest"}),
    ({"kind": "vllm_v1"}, {"victim": "longest"}),
    ({"kind": "vllm_v1"}, {"victim": "fewest_blocks"}),
    ({"kind": "vllm_v0"}, {"mode": "recompute"}),
    ({"kind": "vllm_v0", "watermark": 0.0}, {"mode": "swap"}),
    ({"kind": "vllm_v0", "max_num_seqs": 2}, {"victim": "oldest"}),
    ({"kind": "orca", "reservation": "max"}, {}),
    ({"kind": "orca", "reservation": "pow2"}, {}),
    ({"kind": "orca", "reservation": "oracle", "max_num_batched_tokens": 24}, {}),
    ({"kind": "static", "max_batch_size": 3}, {}),
]

requests = st.lists(
    st.tuples(
        st.integers(0, 40).map(lambda ms: ms / 1000),
        st.integers(1, 14),
        st.integers(1, 10),
    ),
    min_size=1,
    max_size=12,
)


def _check_end_state(engine: Any, n: int) -> None:
    sched = engine.scheduler
    assert not sched.has_work()
    kv = sched.kv
    if isinstance(kv, PagedKV):
        assert kv.gpu.free_blocks == kv.gpu.num_blocks - kv.null_blocks  # (vLLM V1: block 0)
        assert kv.swap.cpu_blocks_used == 0
        assert kv.sums.written_tokens == 0 and kv.sums.internal_slots == 0
    else:
        assert isinstance(kv, ContiguousKV)
        assert kv.free_slots == kv.alloc.capacity_slots
    frames = engine.recorder.frames()
    req = frames.requests
    assert sorted(req.req_id) == list(range(n))
    finished = req[req.status == "finished"]
    assert (finished.generated_tokens == finished.output_tokens).all()
    assert (finished.finish_s >= finished.first_token_s).all()
    others = req[req.status != "finished"]
    assert set(others.status) <= {"rejected", "aborted"}
    assert (others.reason != "").all()


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(reqs=requests, which=st.integers(0, len(SCHEDULERS) - 1), blocks=st.integers(4, 9))
def test_every_scheduler_conserves_blocks_and_requests(
    reqs: list[tuple[float, int, int]], which: int, blocks: int
) -> None:
    scheduler, preemption = SCHEDULERS[which]
    blocks += scheduler["kind"] == "vllm_v1"  # the same usable pool beside vLLM V1's null block
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cfg = tiny_config(
            base, sorted(reqs), scheduler, num_blocks=blocks, max_model_len=16,
            preemption=preemption,
        )  # fmt: skip
        if scheduler["kind"] == "vllm_v0" and preemption.get("mode") == "swap":
            kv = cfg.kv_cache.model_copy(update={"swap_space_gib": 0.004})  # 2 blocks of 4
            cfg = cfg.model_copy(update={"kv_cache": kv})
        engine, _ = build_engine(cfg, base, check_invariants=True)
        engine.run()
        _check_end_state(engine, len(reqs))


def test_each_scheduler_once_on_a_fixed_mix(tmp_path: Path) -> None:
    reqs = [(0.0, 9, 7), (0.0, 5, 9), (0.001, 12, 3), (0.002, 3, 10), (0.01, 14, 2), (0.01, 1, 1)]
    for scheduler, preemption in SCHEDULERS:
        cfg = tiny_config(
            tmp_path, reqs, scheduler, num_blocks=5, max_model_len=16, preemption=preemption
        )
        engine, _ = build_engine(cfg, tmp_path, check_invariants=True)
        engine.run()
        _check_end_state(engine, len(reqs))
