"""The multi-turn return path of prefill/decode disaggregation, hand-computed
(``disaggregation.return_kv``, simkv.engine.kv_return).

The scenarios of ``test_disagg.py``: Llama-2-7B's shapes (524,288 KV bytes per token) over a
link of 0.524288 GB/s with 1 ms latency (one token's KV: 1 ms), a step of n tokens 10 + n ms,
blocks of 4 tokens, vLLM V1's hash prefix cache on both replicas (its default).

One session of two turns: turn 0's prompt is 8 tokens (segment 1), its answer 5 (segment
900); turn 1's prompt is turn 0's prompt + answer + 3 new tokens = 16, its answer 2 tokens,
0.5 s after turn 0 finished.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simkv.config.sim import SimConfig
from simkv.engine.memory.paged import PagedKV
from simkv.engine.request.seq import Seq
from simkv.metrics.disagg import ttft_parts
from simkv.run import build, load_config
from simkv.run.simulate import RunOutput, outputs
from simkv.workload.content import KeyStream, PromptContent
from simkv.workload.request import Workload
from tests.engine.helpers import tiny_data

MS = 1e-3
KV = 524_288  # bytes per token
LINK = {"kind": "ib_ndr", "gb_per_s": 0.524288, "latency_us": 1000}


def _session() -> Workload:
    content = PromptContent.from_lists([[(1, 8)], [(1, 8), (900, 5), (2, 3)]], [900, 901])
    return Workload.from_arrays(
        [0.0, 0.0], [8, 16], [5, 2], source="test", content=content,
        session_id=[0, 0], turn=[0, 1], think_s=[0.0, 0.5],
    )  # fmt: skip


def _run(
    tmp_path: Path, return_kv: bool, caching: str = "hash", **disagg: Any
) -> tuple[Any, RunOutput]:
    data = tiny_data(tmp_path, [(0.0, 1, 1)], {"kind": "vllm_v1"}, num_blocks=16,
                     max_model_len=32)  # fmt: skip
    data["kv_cache"]["prefix_caching"] = caching
    data["fleet"] = {
        "router": {"kind": "least_outstanding"},
        "disaggregation": {"link": LINK, "return_kv": return_kv, **disagg},
        "replicas": [{"name": "p", "role": "prefill"}, {"name": "d", "role": "decode"}],
    }
    cfg = SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))
    run = build(cfg, tmp_path, workload=_session(), check_invariants=True)
    run.fleet.run()
    return run, outputs(cfg, run, (99.0,), 0.0)


def _close(got: float, want: float) -> None:
    assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), (got, want)


@pytest.mark.parametrize("caching", ["hash", "radix"])
def test_turn_two_hits_the_returned_answer_on_the_prefill_replica(
    tmp_path: Path, caching: str
) -> None:
    # turn 0: prefill 8 tokens 0–18 ms, transfer 18–27 ms (1 + 8), first token 38 ms, four
    # decode steps: finished at 82 ms with 8 + 5 - 1 = 12 tokens computed (3 full blocks).
    # The prefill replica caches the prompt's 2 blocks, so 1 block (4 tokens) goes back:
    # 1 ms latency + 4 ms of bytes, 82 → 87 ms.
    # Turn 1 arrives at 582 ms; its prefill hits 3 blocks (12 tokens, at most 15 may hit)
    # and computes 4 (14 ms: 596 ms). The decode replica holds turn 0's 3 blocks: 4 tokens
    # cross (5 ms: 601 ms), first token 612 ms, finished 623 ms. Turn 1's 17 computed tokens
    # are 4 full blocks, all 4 the prefill replica cached from its own 16-token prompt:
    # nothing goes back.
    run, out = _run(tmp_path, return_kv=True, caching=caching)
    reqs = out.requests.set_index("req_id")
    _close(reqs.loc[0, "finish_s"], 82 * MS)
    _close(reqs.loc[0, "kv_return_send_s"], 82 * MS)
    _close(reqs.loc[0, "kv_return_arrive_s"], 87 * MS)
    assert reqs.loc[0, "kv_return_bytes"] == 4 * KV
    assert reqs.loc[1, "arrival_s"] == pytest.approx(0.582)
    assert list(reqs["prefill_hit_tokens"]) == [0, 12]
    for name, ms in [("kv_handoff_s", 596), ("kv_arrive_s", 601), ("first_token_s", 612),
                     ("finish_s", 623)]:  # fmt: skip
        _close(reqs.loc[1, name], ms * MS)
    assert reqs.loc[1, "kv_bytes"] == 4 * KV
    assert reqs.loc[1, "kv_return_bytes"] == 0 and math.isnan(reqs.loc[1, "kv_return_send_s"])
    summary = out.summary
    assert summary["kv_returns"] == 1 and summary["kv_returns_dropped"] == 0
    assert summary["kv_return_bytes"] == 4 * KV
    assert summary["kv_transfer_bytes"] == (8 + 4) * KV
    assert summary["prefill_prefix_hit_frac"] == 12 / (8 + 16)
    # per direction, every byte sent is received once: forward out of the prefill replica
    # and into the decode replica, back the other way
    net = run.fleet.disagg.net
    assert net.sent_bytes == [12 * KV, 4 * KV] and net.received_bytes == [4 * KV, 12 * KV]
    assert list(out.replicas["kv_bytes_out"]) == [12 * KV, 4 * KV]
    for replica in run.replicas:  # every hand-over and return done
        handoff = replica.scheduler.handoff
        assert not (handoff.held or handoff.receiving or handoff.received or handoff.returning)
    parts = ttft_parts(out.requests).sum(axis=1)
    ttft = out.requests["first_token_s"] - out.requests["arrival_s"]
    assert ((parts - ttft).abs() < 1e-12).all()


def test_without_the_return_turn_two_hits_only_the_first_prompt(tmp_path: Path) -> None:
    # turn 1's prefill hits turn 0's prompt only (2 blocks), computes 8 tokens (18 ms):
    # 582 → 600 ms; 4 tokens cross (605 ms), first token 616 ms, finished 627 ms
    run, out = _run(tmp_path, return_kv=False)
    reqs = out.requests.set_index("req_id")
    assert "kv_return_bytes" not in reqs and "kv_returns" not in out.summary
    prefills = run.replicas[0].recorder.frames().requests.set_index("req_id")
    assert list(prefills["prefix_hit_tokens"]) == [0, 8]
    for name, ms in [("kv_handoff_s", 600), ("kv_arrive_s", 605), ("first_token_s", 616),
                     ("finish_s", 627)]:  # fmt: skip
        _close(reqs.loc[1, name], ms * MS)
    net = run.fleet.disagg.net
    assert net.sent_bytes == [12 * KV, 0] and net.received_bytes == [0, 12 * KV]


def test_the_return_is_deterministic(tmp_path: Path) -> None:
    first, second = _run(tmp_path, True)[1], _run(tmp_path, True)[1]
    pd.testing.assert_frame_equal(first.requests, second.requests, check_exact=True)
    pd.testing.assert_frame_equal(first.steps, second.steps, check_exact=True)
    assert first.summary == second.summary


def _seq(req_id: int, prompt: int) -> Seq:
    seq = Seq(req_id, 0.0, prompt, 4, 0, 4)
    seq.keys = KeyStream([(req_id, prompt)], 100 + req_id, 4)  # nothing shared
    return seq


def test_a_prefill_replica_without_free_blocks_drops_the_return() -> None:
    kv = PagedKV(5, 4, prefix_caching="hash", null_block=True)  # 4 usable blocks
    busy = _seq(0, 12)
    assert kv.allocate_slots(busy, 12)  # 3 blocks in use
    back = _seq(1, 8)
    assert kv.reserve_return(back, 12) is None  # 3 blocks needed, 1 free: nothing changed
    assert kv.gpu.free_blocks == 1 and not back.table.block_ids
    assert kv.reserve_return(back, 7) == 4  # 1 full block: it fits
    kv.check([busy, back])
    kv.land_return(back)
    kv.check([busy])
    assert kv.gpu.free_blocks == 1 and kv.cache.cached_blocks >= 1


@pytest.mark.parametrize("mode", ["store_and_forward", "layerwise"])
def test_the_shipped_multi_turn_config_conserves_bytes_per_direction(
    tmp_path: Path, mode: str
) -> None:
    root = Path(__file__).resolve().parents[2] / "configs"
    sets = ["workload.num_sessions=6", "kv_cache.num_blocks=1024"]
    cfg = load_config(
        root / "disagg_multiturn.yaml", [*sets, f"fleet.disaggregation.link.mode={mode}"]
    )
    run = build(cfg, root, check_invariants=True)
    run.fleet.run()
    out = outputs(cfg, run, (99.0,), 0.0)
    reqs, net, roles = out.requests, run.fleet.disagg.net, run.fleet.disagg.roles
    prefill = [r for r, role in enumerate(roles) if role == "prefill"]
    decode = [r for r, role in enumerate(roles) if role == "decode"]
    forward, back = int(reqs["kv_bytes"].sum()), int(reqs["kv_return_bytes"].sum())
    assert back > 0 and out.summary["kv_returns"] > 0
    assert sum(net.sent_bytes[r] for r in prefill) == forward
    assert sum(net.received_bytes[r] for r in decode) == forward
    assert sum(net.sent_bytes[r] for r in decode) == back
    assert sum(net.received_bytes[r] for r in prefill) == back
    returned = reqs[reqs["kv_return_bytes"] > 0]
    assert (returned["kv_return_send_s"] == returned["finish_s"]).all()
    assert (returned["kv_return_arrive_s"] > returned["kv_return_send_s"]).all()
    parts = ttft_parts(reqs).sum(axis=1)
    ttft = reqs["first_token_s"] - reqs["arrival_s"]
    assert ((parts - ttft).abs() < 1e-9).all()


def test_session_affinity_keeps_a_sessions_prefills_on_one_replica(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "configs"
    sets = ["workload.num_sessions=20", "kv_cache.num_blocks=1024",
            "fleet.disaggregation.prefill_router={kind: session_affinity}"]  # fmt: skip
    cfg = load_config(root / "disagg_multiturn.yaml", sets)
    run = build(cfg, root)
    run.fleet.run()
    reqs = outputs(cfg, run, (99.0,), 0.0).requests
    sessions = run.inputs.workload.session_id[reqs["req_id"].to_numpy()]
    per_session = reqs.groupby(sessions)["prefill_replica"].nunique()
    assert (per_session == 1).all() and reqs["prefill_replica"].nunique() == 2
