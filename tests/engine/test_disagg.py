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
    link: dict[str, Any] | None = None,
    scheduler: dict[str, Any] | None = None,
) -> SimConfig:
    data = tiny_data(tmp_path, requests, scheduler or {"kind": "vllm_v1"}, num_blocks=16)
    data["fleet"] = {
        "router": {"kind": "least_outstanding"},
        "disaggregation": {"link": link or LINK, "decider": decider or {"kind": "always"}},
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


@pytest.mark.parametrize("mode", ["store_and_forward", "layerwise"])
def test_invariants_and_conservation_on_the_shipped_config(tmp_path: Path, mode: str) -> None:
    root = Path(__file__).resolve().parents[2] / "configs"
    overrides = ["workload.num_requests=200", "kv_cache.num_blocks=1024"]
    cfg = load_config(root / "disagg.yaml", [*overrides, f"fleet.disaggregation.link.mode={mode}"])
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
    assert (remote["kv_arrive_s"] > remote["kv_handoff_s"]).all()  # (the last layer crosses)
    if mode == "store_and_forward":
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


# Layer-wise hand-overs (simkv.engine.layerwise): the decode replica reserves at routing time and
# the prefill replica pushes each layer as it is computed; Llama-2-7B has 32 layers, so one
# layer of n tokens takes n / 32 ms on LINK, and the latency lands after the last byte.


def _layerwise(link: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**(link or LINK), "mode": "layerwise"}


def _both(tmp_path: Path, link: dict[str, Any] | None = None, **kw: Any) -> list[pd.DataFrame]:
    """The requests of one scenario store-and-forward, then layer-wise; layer-wise lands no
    request's KV or first token later."""
    sf, lw = (
        _requests(_config(tmp_path, link=mode_link, **kw), tmp_path)
        for mode_link in (link or LINK, _layerwise(link))
    )
    for name in ("kv_arrive_s", "first_token_s"):
        assert (lw[name].isna() == sf[name].isna()).all(), name  # (NaN: prefilled locally)
        assert ((lw[name] <= sf[name]) | sf[name].isna()).all(), name
    return [sf, lw]


def test_layerwise_over_a_fast_link_exposes_one_layer_after_the_prefill(tmp_path: Path) -> None:
    # routed at 0: the decode replica reserves and the flow starts at 0; the prefill (0-18 ms)
    # releases 31/32 of 8 tokens over 18 ms, slower than the link's 1 token/ms, so the flow
    # keeps up; the last layer (8/32 token) leaves 18 to 18.25 and lands 1 ms later: 19.25 ms
    # (store-and-forward: 18 + 1 + 8 = 27). First token 19.25 + 11 ms
    sf, lw = _both(tmp_path, requests=[(0.0, 8, 3)])
    _close(sf.loc[0, "kv_arrive_s"], 27 * MS)
    row = lw.loc[0]
    for name, ms in [("kv_handoff_s", 18), ("kv_send_s", 0), ("kv_arrive_s", 18 + 1 + 8 / 32),
                     ("first_token_s", 30.25), ("finish_s", 52.25)]:  # fmt: skip
        _close(row[name], ms * MS)
    assert row["kv_bytes"] == 8 * 524_288
    parts = ttft_parts(lw).loc[0]
    want = {"prefill_queue": 0, "prefill": 18, "kv_wait": 0, "transfer": 1.25,
            "decode_queue": 0, "decode_step": 11}  # fmt: skip
    for part in TTFT_PARTS:
        _close(parts[part], want[part] * MS)
    _close(parts.sum(), row["first_token_s"] - row["arrival_s"])


def test_layerwise_over_a_slow_link_hides_at_most_the_prefill(tmp_path: Path) -> None:
    # a link of 4 ms per token is slower than the prefill produces (31/32 × 8 tokens in
    # 18 ms): the flow is link-bound from its start at 0, so it lands at 0 + 32 + 1 = 33 ms,
    # the store-and-forward time counted from the reservation (that one: 18 + 1 + 32 = 51)
    slow = {**LINK, "gb_per_s": 0.524288 / 4}
    sf, lw = _both(tmp_path, slow, requests=[(0.0, 8, 3)])
    _close(sf.loc[0, "kv_arrive_s"], 51 * MS)
    _close(lw.loc[0, "kv_arrive_s"], max(18 + 1 + 4 * 8 / 32, 0 + 1 + 4 * 8) * MS)
    _close(lw.loc[0, "first_token_s"], 44 * MS)


def test_layerwise_follows_each_chunk_of_a_chunked_prefill(tmp_path: Path) -> None:
    # a budget of 8 tokens prefills 12 in two steps: 8 (0-18 ms), 4 (18-32 ms). At 18 the
    # flow has sent 7.75 tokens, the last layer of the first chunk (0.25) is released, and
    # the second chunk releases 3.875 tokens over 14 ms: the link catches up, and the last
    # layer of the second chunk (4/32 token) leaves 32 to 32.125: lands at 33.125 ms
    # (store-and-forward: 32 + 1 + 12 = 45)
    budget = {"kind": "vllm_v1", "max_num_batched_tokens": 8, "max_num_seqs": 8}
    sf, lw = _both(tmp_path, requests=[(0.0, 12, 2)], scheduler=budget)
    _close(sf.loc[0, "kv_arrive_s"], 45 * MS)
    _close(lw.loc[0, "kv_handoff_s"], 32 * MS)
    _close(lw.loc[0, "kv_arrive_s"], (32 + 4 / 32 + 1) * MS)
    _close(lw.loc[0, "first_token_s"], (33.125 + 11) * MS)


def test_layerwise_reserved_mid_step_sends_what_the_layers_done_hold(tmp_path: Path) -> None:
    # request 0 (4 tokens) stays local: the decode replica runs it 0-14 ms. Request 1 (8
    # tokens) arrives at 1 ms: prefilled 1-19 ms, reserved at 14 ms, when 31/32 × 8 × 13/18
    # tokens are sendable; over a link of 4 tokens/ms it catches up by 15.57 ms, so only the
    # last layer (0.25 token, 0.0625 ms) follows the prefill: lands at 19 + 0.0625 + 1 ms.
    # (Store-and-forward: request 1 reaches the decode replica at 19, mid-step; it reserves
    # at 25 and lands at 25 + 1 + 2 = 28 ms.)
    fast = {**LINK, "gb_per_s": 4 * 0.524288}
    local = {"kind": "prompt_threshold", "min_prompt_tokens": 4}
    sf, lw = _both(tmp_path, fast, requests=[(0.0, 4, 2), (0.001, 8, 2)], decider=local)
    _close(sf.loc[1, "kv_arrive_s"], 28 * MS)
    row = lw.loc[1]
    for name, ms in [("kv_send_s", 14), ("kv_handoff_s", 19), ("kv_arrive_s", 20.0625),
                     ("first_token_s", 36)]:  # fmt: skip
        _close(row[name], ms * MS)


def test_layerwise_backpressure_holds_the_kv_until_the_decode_side_has_room(
    tmp_path: Path,
) -> None:
    # the backpressure scenario above, layer-wise: request 0 reserves at 0 and lands at
    # 22 + 12/32 + 1 = 23.375 ms; it runs 23.375-34.375 and 34.375-45.375 ms, then frees its
    # blocks. Request 1 cannot reserve until 45.375; its KV is complete and held since 22, so
    # it crosses whole: 45.375 + 12 + 1 = 58.375 ms, its first token at 69.375 ms (81).
    cfg = _config(
        tmp_path, [(0.0, 12, 2), (0.0, 12, 2)], prefill=2, decode_blocks=5, link=_layerwise()
    )
    run = build(cfg, tmp_path, check_invariants=True)
    seen: list[dict[str, Any]] = []
    _probe(run, [30, 50, 60], seen)
    run.fleet.run()
    reqs = outputs(cfg, run, (99.0,), 0.0).requests.set_index("req_id")
    for i, name, ms in [(0, "kv_arrive_s", 23.375), (1, "kv_handoff_s", 22),
                        (1, "kv_send_s", 45.375), (1, "kv_arrive_s", 58.375),
                        (1, "first_token_s", 69.375)]:  # fmt: skip
        _close(reqs.loc[i, name], ms * MS)
    _close(ttft_parts(reqs).loc[1, "kv_wait"], 23.375 * MS)
    p1 = reqs.loc[1, "prefill_replica"]
    at30, at50, at60 = seen
    assert at30["held"][p1] == [1] and at30["receiving"][2] == []
    assert at50["held"][p1] == [1] and at50["receiving"][2] == [1]
    assert at60["held"][p1] == [] and at60["used"][p1] == 1  # (the null block)
    net = run.fleet.disagg.net
    assert sum(net.sent_bytes) == sum(net.received_bytes) == 2 * 12 * 524_288
