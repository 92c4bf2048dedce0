"""vllm_v1 against vLLM 0.11's source, through ``simkv run``: hand-computed scenarios for the
edge rules (chunked prefill off, caching at allocation, the null block, the priority victim,
the budget defaults and refusals, configs that can only stall).

Cost: a step of n tokens takes 10 + n ms (a ``table`` cost model); block ids, chunks and
victims follow the vLLM functions each test names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from simkv.cli import app
from tests.engine.helpers import tiny_document

MS = 1e-3
runner = CliRunner()


def _write_run(
    tmp_path: Path,
    rows: list[tuple[float, int, int, int]],
    scheduler: dict[str, Any],
    *,
    num_blocks: int,
    max_model_len: int,
    block_size: int = 4,
    **extra: Any,
) -> Path:
    """A config over ``rows`` = [(arrival_s, prompt, output, priority), ...]; returns its path."""
    trace = tmp_path / "trace.csv"
    lines = ["arrival_s,prompt_tokens,output_tokens,priority"]
    trace.write_text("\n".join(lines + [",".join(map(str, row)) for row in rows]) + "\n")
    columns = {"arrival_s": "arrival_s", "priority": "priority"}
    workload = {"kind": "trace", "path": str(trace), "format": "generic", "columns": columns}
    return _config(tmp_path, workload, scheduler, num_blocks, max_model_len, block_size, extra)


def _config(
    tmp_path: Path,
    workload: dict[str, Any],
    scheduler: dict[str, Any],
    num_blocks: int,
    max_model_len: int,
    block_size: int,
    extra: dict[str, Any],
) -> Path:
    data = tiny_document(tmp_path, "conformance", workload, scheduler, num_blocks=num_blocks,
                         block_size=block_size, max_model_len=max_model_len, **extra)  # fmt: skip
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _simkv_run(config: Path, *args: str) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """``simkv run CONFIG --check`` (invariants after every step): steps, requests, summary."""
    out = config.parent / "out"
    result = runner.invoke(app, ["run", str(config), "--out", str(out), "--check", *args])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    steps = pd.read_parquet(out / "steps.parquet")
    requests = pd.read_parquet(out / "requests.parquet").set_index("req_id")
    return steps, requests, summary


def _steps(steps: pd.DataFrame) -> list[tuple[int, int, int, int]]:
    """(prefill_tokens, decode_tokens, batch_size, preempted) per step."""
    cols = (steps.prefill_tokens, steps.decode_tokens, steps.batch_size, steps.preempted)
    return [tuple(map(int, row)) for row in zip(*cols, strict=True)]


# -- rule 1: chunked prefill off --------------------------------------------------------------
def test_threshold_applies_before_the_chunked_prefill_check(tmp_path: Path) -> None:
    """vLLM 0.11 ``v1/core/sched/scheduler.py`` ``Scheduler.schedule``: a waiting request's
    tokens are capped by ``long_prefill_token_threshold`` *before* the chunked-prefill check,
    and a running one is chunked by the threshold whether or not chunked prefill is on.

    One 40-token prompt (output 2), threshold 16, chunked prefill off, budget = max_model_len
    = 64 (the default). 1: 16 → .026; 2: 16 → .052; 3: 8 → .070, first token; 4: decode →
    .081, finished. (simkv used to refuse this config: a prompt longer than the threshold.)
    """
    sched = {"kind": "vllm_v1", "enable_chunked_prefill": False, "long_prefill_token_threshold": 16}
    config = _write_run(tmp_path, [(0, 40, 2, 0)], sched, num_blocks=20, max_model_len=64)
    steps, req, _ = _simkv_run(config)
    assert _steps(steps) == [(16, 0, 1, 0), (16, 0, 1, 0), (8, 0, 1, 0), (0, 1, 1, 0)]
    assert req.loc[0, "first_token_s"] == pytest.approx(70 * MS)
    assert req.loc[0, "finish_s"] == pytest.approx(81 * MS)


# budget 16 = max_model_len, chunked prefill off. A1 = A2 = (4, 2) at 0; B1 = B2 = (15, 1) and
# C = (1, 1) at 1 ms. 1: A1 + A2 prefill 8 → .018.
_SET_ASIDE_ROWS = [(0, 4, 2, 0), (0, 4, 2, 0), (0.001, 15, 1, 0), (0.001, 15, 1, 0),
                   (0.001, 1, 1, 0)]  # fmt: skip


def test_chunked_prefill_off_sets_aside_what_exceeds_the_budget_left(tmp_path: Path) -> None:
    """vLLM 0.11 ``v1/core/sched/scheduler.py`` ``Scheduler.schedule`` (the waiting loop):
    with chunked prefill off, a waiting request whose tokens exceed the budget left goes to
    ``skipped_waiting_requests`` (``prepend_request``) and the loop goes on; afterwards
    ``waiting.prepend_requests(skipped)`` puts them back at the head, the last set aside
    first (``FCFSRequestQueue``: ``extendleft(reversed(...))`` of a deque built by
    ``appendleft``).

    2 (.018): A1, A2 decode (budget left 14); B1 (15) and B2 (15) set aside, C (1) admitted:
    3 tokens → .031, A1, A2, C finished; the waiting queue is now B2, B1.
    3 (.031): B2 15 (left 1), B1 set aside → .056, B2 finished. 4: B1 15 → .081.
    """
    sched = {"kind": "vllm_v1", "enable_chunked_prefill": False, "max_num_batched_tokens": 16}
    config = _write_run(tmp_path, _SET_ASIDE_ROWS, sched, num_blocks=40, max_model_len=16)
    steps, req, _ = _simkv_run(config)
    assert _steps(steps) == [(8, 0, 2, 0), (1, 2, 3, 0), (15, 0, 1, 0), (15, 0, 1, 0)]
    finish = [req.loc[i, "finish_s"] for i in range(5)]
    assert finish == pytest.approx([31 * MS, 31 * MS, 81 * MS, 56 * MS, 31 * MS])


def test_vllm_0_32_stops_admission_at_what_exceeds_the_budget_left(tmp_path: Path) -> None:
    """``vllm_version: "0.32"``: vLLM 0.32 (PR #28911, after 0.11) ends the waiting loop at a
    request over the budget left instead of setting it aside (``Scheduler.schedule``).

    2 (.018): A1, A2 decode, B1 (15 > 14) stops admission → .030, A1, A2 finished.
    3 (.030): B1 15 (left 1), B2 stops → .055. 4: B2 15 + C 1 → .081, both finished.
    """
    sched = {"kind": "vllm_v1", "enable_chunked_prefill": False, "max_num_batched_tokens": 16,
             "vllm_version": "0.32"}  # fmt: skip
    config = _write_run(tmp_path, _SET_ASIDE_ROWS, sched, num_blocks=40, max_model_len=16)
    steps, req, _ = _simkv_run(config)
    assert _steps(steps) == [(8, 0, 2, 0), (0, 2, 2, 0), (15, 0, 1, 0), (16, 0, 2, 0)]
    finish = [req.loc[i, "finish_s"] for i in range(5)]
    assert finish == pytest.approx([30 * MS, 30 * MS, 55 * MS, 81 * MS, 81 * MS])


# -- rule 2: blocks are cached when allocated -----------------------------------------------
def test_identical_prompts_admitted_together_share_blocks_in_that_step(tmp_path: Path) -> None:
    """vLLM 0.11 ``v1/core/kv_cache_manager.py`` ``KVCacheManager.allocate_slots`` caches
    the full blocks of the scheduled tokens (``coordinator.cache_blocks``) as it allocates
    them, so a request admitted later in the same step hits them
    (``get_computed_blocks``: at most ``num_tokens - 1`` tokens, whole blocks).

    Two identical 512-token prompts (one Mooncake hash id) at t=0, blocks of 16, output 2.
    1: the first computes 512 and caches its 32 blocks; the second hits (512 - 1) // 16 = 31
    blocks (496 tokens, shared: 496 slots saved) and computes 16: 528 → .538. 2: both decode.
    """
    trace = tmp_path / "trace.jsonl"
    row = {"timestamp": 0, "input_length": 512, "output_length": 2, "hash_ids": [7]}
    trace.write_text((json.dumps(row) + "\n") * 2)
    workload = {"kind": "trace", "path": str(trace), "format": "mooncake"}
    config = _config(tmp_path, workload, {"kind": "vllm_v1"}, 100, 1024, 16, {})
    steps, req, _ = _simkv_run(config)
    assert _steps(steps) == [(528, 0, 2, 0), (0, 2, 2, 0)]
    assert list(steps.cache_hit_tokens) == [496, 0]
    assert steps.shared_slots[0] == 496
    assert list(req.prefix_hit_tokens) == [0, 496]
    assert req.loc[1, "first_token_s"] == pytest.approx(538 * MS)


# -- rule 3: the null block ---------------------------------------------------------------------
def test_block_zero_is_the_null_block_and_usage_leaves_it_out(tmp_path: Path) -> None:
    """vLLM 0.11 ``v1/core/block_pool.py``: ``BlockPool.__init__`` takes block 0 as the null
    block (never handed out, never freed), ``get_usage`` divides by ``num_gpu_blocks - 1``.

    5 blocks of 4: 4 usable. One request (prompt 8, output 3). 1: prefill 8 (2 blocks) → 2
    used, 2 free. 2: its 9th token takes a third block → 3 used, 1 free. 3: last token,
    finished: all 4 free. Peak usage 3 / 4.
    """
    config = _write_run(tmp_path, [(0, 8, 3, 0)], {"kind": "vllm_v1"}, num_blocks=5,
                        max_model_len=16)  # fmt: skip
    steps, _, summary = _simkv_run(config)
    assert list(zip(steps.blocks_used, steps.blocks_free, strict=True)) == [(2, 2), (3, 1), (0, 4)]
    assert summary["peak_kv_usage"] == pytest.approx(0.75)
    assert summary["kv_num_blocks"] == 5


def test_a_pool_whose_usable_blocks_cannot_hold_a_request_is_refused(tmp_path: Path) -> None:
    """vLLM's start-up check (``v1/core/kv_cache_utils.py`` ``check_enough_kv_cache_memory``)
    counts the null block as room: 4 blocks of 4 pass for max_model_len 16, but only 3 are
    usable, and a request of 8 + 8 tokens needs cdiv(15, 4) = 4: it would preempt itself
    forever. simkv refuses the config: exit 2, one line, the reason and the fix."""
    config = _write_run(tmp_path, [(0, 8, 8, 0)], {"kind": "vllm_v1"}, num_blocks=4,
                        max_model_len=16)  # fmt: skip
    result = runner.invoke(app, ["run", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert f"{config}:" in line and "kv_cache" in line and "null block" in line
    assert "at least 5 blocks" in line


def test_a_pool_of_only_the_null_block_is_refused(tmp_path: Path) -> None:
    """One block of 64 passes vLLM's memory check for max_model_len 64, and is the null
    block: nothing is left for requests (even when every prompt is too long to run)."""
    config = _write_run(tmp_path, [(0, 100, 5, 0)], {"kind": "vllm_v1"}, num_blocks=1,
                        max_model_len=64, block_size=64)  # fmt: skip
    result = runner.invoke(app, ["run", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert "leave 0 for requests" in line and "at least 2 blocks" in line


# -- rule 4: the priority policy's victim -----------------------------------------------------
@pytest.mark.parametrize("victim", [None, "lowest_priority", "newest"])
def test_priority_policy_preempts_by_priority_then_arrival(
    tmp_path: Path, victim: str | None
) -> None:
    """vLLM 0.11 ``v1/core/sched/scheduler.py`` ``Scheduler.schedule``: under the priority
    policy the victim is ``max(running, key=(priority, arrival_time))``; vLLM has no separate
    victim setting, so simkv's default (no ``preemption.victim``) is that rule.

    3 usable blocks of 4, no prefix caching. A = (4, 6) priority 1 at 0; B = (3, 4) priority 0
    at 1 ms. 1: A 4 → .014. 2: A decode (2nd block) + B 3 (3rd block) → .028. 3: both decode
    in place → .040. 4: B's 5th token needs a block, none free: the victim is A (priority 1,
    though B is the newest); B decodes → .051. 5: B decodes; A (7 tokens, 2 blocks) waits
    (1 free) → .062, B finished. 6: A recomputes 7 → .079. 7: → .090. 8: → .101, finished.
    With ``victim: newest`` (a what-if here) B gives way instead and A runs on.
    """
    rows = [(0, 4, 6, 1), (0.001, 3, 4, 0)]
    pre = {} if victim is None else {"preemption": {"victim": victim}}
    kv = {"kv_cache": {"block_size": 4, "num_blocks": 4, "prefix_caching": "none"}}
    config = _write_run(tmp_path, rows, {"kind": "vllm_v1", "policy": "priority"}, num_blocks=4,
                        max_model_len=16, **pre, **kv)  # fmt: skip
    steps, req, _ = _simkv_run(config)
    resolved = yaml.safe_load((tmp_path / "out" / "config.resolved.yaml").read_text())
    if victim == "newest":
        assert (req.loc[0, "preemptions"], req.loc[1, "preemptions"]) == (0, 1)
        return
    assert resolved["preemption"]["victim"] == "lowest_priority"
    assert _steps(steps) == [
        (4, 0, 1, 0), (3, 1, 2, 0), (0, 2, 2, 0), (0, 1, 1, 1), (0, 1, 1, 0), (7, 0, 1, 0),
        (0, 1, 1, 0), (0, 1, 1, 0),
    ]  # fmt: skip
    assert (req.loc[0, "preemptions"], req.loc[1, "preemptions"]) == (1, 0)
    assert req.loc[1, "finish_s"] == pytest.approx(62 * MS)
    assert req.loc[0, "finish_s"] == pytest.approx(101 * MS)


# -- rule 5: budget defaults and the configs vLLM refuses ------------------------------------
def test_budget_defaults_to_max_model_len_with_chunked_prefill_off(tmp_path: Path) -> None:
    """vLLM 0.11 ``engine/arg_utils.py`` ``EngineArgs._set_default_args``: with chunked
    prefill off the budget is ``max_model_len``; on, 8192 (simkv's default) — and
    ``max_num_seqs`` defaults to ``min(256, budget)``. The resolved config states them."""
    for chunked, budget, seqs in ((False, 24, 24), (True, 8192, 256)):
        sched = {"kind": "vllm_v1", "enable_chunked_prefill": chunked}
        config = _write_run(tmp_path, [(0, 4, 1, 0)], sched, num_blocks=10, max_model_len=24)
        result = runner.invoke(app, ["validate", str(config)])
        assert result.exit_code == 0, result.output
        assert f"max_num_batched_tokens: {budget}" in result.output
        assert f"max_num_seqs: {seqs}" in result.output


@pytest.mark.parametrize(
    ("scheduler", "message"),
    [
        ({"kind": "vllm_v1", "enable_chunked_prefill": False, "max_num_batched_tokens": 12},
         "scheduler.max_num_batched_tokens: 12 is below model.max_model_len 16 with chunked "
         "prefill off, which vLLM refuses at start-up"),
        ({"kind": "vllm_v1", "max_num_batched_tokens": 8, "max_num_seqs": 9},
         "scheduler.max_num_batched_tokens: 8 is below scheduler.max_num_seqs 9, which vLLM "
         "refuses at start-up; raise it to at least 9"),
        ({"kind": "vllm_v0", "max_num_batched_tokens": 12},
         "scheduler.max_num_batched_tokens: 12 is below model.max_model_len 16, which vLLM 0.6 "
         "refuses at start-up"),
        ({"kind": "vllm_v0", "max_num_batched_tokens": 16, "max_num_seqs": 17},
         "scheduler.max_num_batched_tokens: 16 is below scheduler.max_num_seqs 17, which vLLM "
         "refuses at start-up; raise it to at least 17"),
    ],
)  # fmt: skip
def test_budgets_vllm_refuses_are_config_errors(
    tmp_path: Path, scheduler: dict[str, Any], message: str
) -> None:
    """vLLM 0.11 ``config/scheduler.py`` ``SchedulerConfig._verify_args`` raises for a budget
    below ``max_model_len`` with chunked prefill off and for one below ``max_num_seqs``, and
    vLLM 0.6.3 ``config.py`` ``SchedulerConfig._verify_args`` the same (its default scheduler,
    vllm_v0's, has no chunked prefill): simkv refuses the same configs, exit 2,
    ``file:line key: reason; fix``."""
    config = _write_run(tmp_path, [(0, 4, 1, 0)], scheduler, num_blocks=10, max_model_len=16)
    result = runner.invoke(app, ["run", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    text = config.read_text().splitlines()
    key_line = next(i for i, t in enumerate(text, 1) if "max_num_batched_tokens" in t)
    assert f"{config}:{key_line} {message}" in line


# -- rule 5: the configs simkv ships --------------------------------------------------------
def test_every_shipped_config_is_one_vllm_would_start() -> None:
    """Every ``configs/**`` run config validates (with the budget refusals above)."""
    from simkv.run import load_config

    root = Path(__file__).resolve().parents[2] / "configs"
    checked = 0
    for path in sorted(root.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict) or "workload" not in data:
            continue  # a sweep
        load_config(path)
        checked += 1
    assert checked > 5
