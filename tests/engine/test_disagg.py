"""Prefill/decode disaggregation, hand-computed (simkv.engine.disagg, simkv.engine.handoff).

The path follows vLLM's ``NixlConnector`` (0.11–0.32, ``v1/core/sched/scheduler.py``): the
prefill replica runs the prompt as a one-token request and holds its blocks
(``request_finished`` delays the free); the decode replica reserves blocks for the prompt when
its scheduler reaches the request (``WAITING_FOR_REMOTE_KVS``), the KV crosses the link, and
its first step recomputes the last prompt token (``_update_waiting_for_remote_kv``).

Every scenario runs Llama-2-7B's shapes (524,288 KV bytes per token) over a link of
0.524288 GB/s with 1 ms latency, so one token's KV takes 1 ms to send, and a step of n tokens
takes 10 + n ms (the tiny step table of :func:`tests.engine.helpers.tiny_document`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import simpy
import yaml

from simkv.config.sim import SimConfig
from simkv.metrics.disagg import TTFT_PARTS, ttft_parts
from simkv.run import build, load_config, simulate
from simkv.run.simulate import outputs
from tests.engine.helpers import tiny_data

MS = 1e-3
LINK = {"kind": "ib_ndr", "gb_per_s": 0.524288, "latency_us": 1000}


def _config(
    tmp_path: Path,
    requests: list[tuple[float, int, int]],
    *,
    prefill: int = 1,
    decode_blocks: int = 16,
    decider: dict[str, Any] | None = None,
) -> SimConfig:
    data = tiny_data(tmp_path, requests, {"kind": "vllm_v1"}, num_blocks=16)
    data["fleet"] = {
        "router": {"kind": "least_outstanding"},
        "disaggregation": {"link": LINK, "decider": decider or {"kind": "always"}},
        "replicas": [
            {"name": "p", "role": "prefill", "count": prefill},
            {"name": "d", "role": "decode",
             "kv_cache": {"block_size": 4, "num_blocks": decode_blocks}},
        ],
    }  # fmt: skip
    return SimConfig.model_validate(yaml.safe_load(yaml.safe_dump(data)))


def _requests(cfg: SimConfig, tmp_path: Path) -> pd.DataFrame:
    out = simulate(cfg, tmp_path, check_invariants=True)
    return out.requests.set_index("req_id")


def _close(got: float, want: float) -> None:
    assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), (got, want)


def test_one_request_prefill_transfer_decode(tmp_path: Path) -> None:
    # prefill of 8 tokens: 18 ms; transfer: 1 ms + 8 tokens × 1 ms = 9 ms, from 18 to 27 ms;
    # the decode replica's first step runs the last prompt token (11 ms): first token at 38 ms,
    # then two decode steps of 11 ms: finished at 60 ms
    row = _requests(_config(tmp_path, [(0.0, 8, 3)]), tmp_path).loc[0]
    assert row["replica"] == 1 and row["prefill_replica"] == 0
    assert row["kv_bytes"] == 8 * 524_288
    for name, ms in [("prefill_scheduled_s", 0), ("kv_handoff_s", 18), ("kv_send_s", 18),
                     ("kv_arrive_s", 27), ("first_scheduled_s", 27), ("first_token_s", 38),
                     ("finish_s", 60)]:  # fmt: skip
        _close(row[name], ms * MS)


def test_ttft_parts_sum_to_ttft(tmp_path: Path) -> None:
    reqs = _requests(_config(tmp_path, [(0.0, 8, 3)]), tmp_path)
    parts = ttft_parts(reqs).loc[0]
    want = {"prefill_queue": 0, "prefill": 18, "kv_wait": 0, "transfer": 9,
            "decode_queue": 0, "decode_step": 11}  # fmt: skip
    for part in TTFT_PARTS:
        _close(parts[part], want[part] * MS)
    _close(parts.sum(), reqs.loc[0, "first_token_s"] - reqs.loc[0, "arrival_s"])


def test_two_transfers_share_the_decode_nic(tmp_path: Path) -> None:
    # two prefill replicas prefill one request each (18 ms); both transfers start at 18 ms
    # into one decode NIC: each gets half its bandwidth, 8 tokens take 16 ms after the 1 ms
    # latency: both arrive at 35 ms, and one step of 2 tokens (12 ms) gives both first tokens
    reqs = _requests(_config(tmp_path, [(0.0, 8, 2), (0.0, 8, 2)], prefill=2), tmp_path)
    assert sorted(reqs["prefill_replica"]) == [0, 1]
    for i in (0, 1):
        _close(reqs.loc[i, "kv_send_s"], 18 * MS)
        _close(reqs.loc[i, "kv_arrive_s"], 35 * MS)
        _close(reqs.loc[i, "first_token_s"], 47 * MS)


def _probe(run: Any, at_ms: list[float], seen: list[dict[str, Any]]) -> None:
    """Record, at each time of ``at_ms``, the blocks each replica uses and its hand-overs."""
    env: simpy.Environment = run.fleet.env

    def probe() -> Any:
        for ms in at_ms:
            yield env.timeout(ms * MS - env.now)
            seen.append({
                "used": [r.scheduler.kv.gpu.used_blocks for r in run.replicas],
                "held": [sorted(r.scheduler.handoff.held) for r in run.replicas],
                "receiving": [sorted(r.scheduler.handoff.receiving) for r in run.replicas],
            })  # fmt: skip

    env.process(probe())


def test_backpressure_the_prefill_side_holds_the_kv_until_the_decode_side_has_room(
    tmp_path: Path,
) -> None:
    # the decode pool has 4 blocks of 4 (and vLLM's null block). Both 12-token prompts are
    # prefilled at once (22 ms). Request 0 reserves 3 blocks at 22 ms, arrives at 22 + 1 + 12
    # = 35 ms, runs its last prompt token (11 ms: 46 ms) and one decode step (57 ms), taking
    # the 4th block. Request 1 cannot reserve 3 blocks until request 0 frees them at 57 ms:
    # its prefill replica holds its KV from 22 to 70 ms (57 + 13), its first token at 81 ms.
    cfg = _config(tmp_path, [(0.0, 12, 2), (0.0, 12, 2)], prefill=2, decode_blocks=5)
    run = build(cfg, tmp_path, check_invariants=True)
    seen: list[dict[str, Any]] = []
    _probe(run, [30, 60, 75], seen)
    run.fleet.run()
    reqs = outputs(cfg, run, (99.0,), 0.0).requests.set_index("req_id")
    _close(reqs.loc[1, "kv_handoff_s"], 22 * MS)
    _close(reqs.loc[1, "kv_send_s"], 57 * MS)
    _close(reqs.loc[1, "kv_arrive_s"], 70 * MS)
    _close(reqs.loc[1, "first_token_s"], 81 * MS)
    _close(ttft_parts(reqs).loc[1, "kv_wait"], 35 * MS)
    p1 = reqs.loc[1, "prefill_replica"]
    at30, at60, at75 = seen
    # at 30 ms: request 1 is held on its prefill replica (3 blocks), nothing reserved for it
    assert at30["held"][p1] == [1] and at30["used"][p1] == 3 + 1  # (+ the null block)
    assert at30["receiving"][2] == [0] and at30["used"][2] == 3 + 1
    # at 60 ms: request 1's KV is on both sides: held there, reserved here
    assert at60["held"][p1] == [1] and at60["used"][p1] == 3 + 1
    assert at60["receiving"][2] == [1] and at60["used"][2] == 3 + 1
    # at 75 ms the transfer has ended: the prefill side has freed its blocks
    assert at75["held"][p1] == [] and at75["used"][p1] == 1
    assert at75["receiving"][2] == []


def test_invariants_and_conservation_on_the_shipped_config(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "configs"

    cfg = load_config(
        root / "disagg.yaml", ["workload.num_requests=200", "kv_cache.num_blocks=1024"]
    )
    run = build(cfg, root, check_invariants=True)
    run.fleet.run()
    out = outputs(cfg, run, (99.0,), 0.0)
    reqs = out.requests
    remote = reqs[reqs["prefill_replica"] >= 0]
    assert len(remote) == len(reqs) == 200  # (decider: always)
    net = run.fleet.disagg.net
    # every byte sent is received once, and they are the requests' KV
    assert sum(net.sent_bytes) == sum(net.received_bytes) == int(remote["kv_bytes"].sum())
    assert (remote["kv_bytes"] == remote["prompt_tokens"] * cfg.model.kv_bytes_per_token).all()
    # no request runs on its decode replica before its KV arrived
    assert (remote["first_scheduled_s"] >= remote["kv_arrive_s"]).all()
    assert (remote["kv_arrive_s"] >= remote["kv_send_s"]).all()
    assert (remote["kv_send_s"] >= remote["kv_handoff_s"]).all()
    # the TTFT parts sum to the TTFT
    parts = ttft_parts(reqs).sum(axis=1)
    ttft = reqs["first_token_s"] - reqs["arrival_s"]
    assert ((parts - ttft).abs() < 1e-9).all()
    # every replica ended with its hand-overs done
    for replica in run.replicas:
        handoff = replica.scheduler.handoff
        assert not (handoff.held or handoff.receiving or handoff.received)
    assert out.summary["kv_transfer_bytes"] == sum(net.sent_bytes)
    assert out.summary["remote_prefill_frac"] == 1.0


@pytest.mark.parametrize(
    ("decider", "remote"),
    [
        ({"kind": "never"}, [False, False]),
        ({"kind": "always"}, [True, True]),
        ({"kind": "prompt_threshold", "min_prompt_tokens": 8}, [False, True]),
        ({"kind": "prefix_hit_threshold", "min_uncached_tokens": 8}, [False, True]),
    ],
)
def test_the_decider_keeps_short_prompts_local(
    tmp_path: Path, decider: dict[str, Any], remote: list[bool]
) -> None:
    cfg = _config(tmp_path, [(0.0, 8, 2), (0.1, 12, 2)], decider=decider)
    reqs = _requests(cfg, tmp_path)
    assert list(reqs["prefill_replica"] >= 0) == remote
    assert (reqs["replica"] == 1).all()  # served by the decode replica either way
    assert reqs["status"].eq("finished").all()


def test_a_disaggregated_run_is_deterministic(tmp_path: Path) -> None:
    reqs = [(0.01 * k, 4 + k % 9, 1 + k % 5) for k in range(40)]
    cfg = _config(tmp_path, reqs, prefill=2)
    first, second = simulate(cfg, tmp_path), simulate(cfg, tmp_path)
    pd.testing.assert_frame_equal(first.requests, second.requests, check_exact=True)
    pd.testing.assert_frame_equal(first.steps, second.steps, check_exact=True)
