"""Run scenarios through a real vLLM engine on the CPU and record every scheduler step.

Runs inside the reference virtualenv (``make vllm-reference``), never inside simkv's::

    .venv-vllm/bin/python tools/vllm_reference/record.py SCENARIOS.jsonl.gz OUT.jsonl.gz

The model is the tiny Llama of ``tiny-llama/config.json`` with random weights
(``load_format="dummy"``, nothing downloaded), prompts are token ids, every request decodes
exactly its output length (``min_tokens = max_tokens``, EOS ignored), sampling at temperature
1. A ``Scheduler`` subclass (vLLM's ``scheduler_cls``) records each ``schedule()`` call: tokens
scheduled per request, the requests preempted, free blocks, waiting and running counts.

One engine serves every scenario with the same block size, model length and async mode: each
scenario installs a fresh scheduler built with its own knobs and pool size (the engine's KV
tensors are sized for the largest pool; a scenario only uses its first ``num_blocks``).

Async scheduling (``async_scheduling: true``) runs vLLM's own async path on the CPU through
the runtime patches of ``cpu_async.py``: ``AsyncScheduler`` and ``EngineCore``'s batch queue
of 2, where ``engine.step()`` schedules step n+1 before it takes step n's output. Each
``engine.step()`` still makes at most one ``schedule()`` call, so a scenario's ``step`` means
the same in both modes (added before the k-th ``schedule()`` call that scheduled work).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

# set before vLLM is imported: in-process engine, one OpenMP thread, no CPU binding
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

# run as a script inside vLLM's virtualenv: this folder is on sys.path, simkv is not
from scenario import Scenario, read_jsonl_gz, write_jsonl_gz

HERE = Path(__file__).resolve().parent
MODEL = HERE / "tiny-llama"
ENGINE_MAX_SEQS = 64
ENGINE_MAX_TOKENS = 2048
ENGINE_BLOCKS = 1024
STEP_LIMIT = 20_000  # a scenario that runs longer is reported as a stall, never a hang


def _rid(request_id: str) -> int:
    """Our request ids are ``r<index>``; vLLM may append ``-<suffix>``."""
    return int(request_id.split("-")[0][1:])


def _recording_scheduler(base: type) -> type:
    class Recording(base):  # type: ignore[misc, valid-type]
        log: list[list[Any]]
        # diagnostics, not written out: ("S", call, scheduled, placeholders before the call,
        # free blocks after, batches in flight before) per schedule() and ("U", call whose
        # output it is, finished, free blocks after) per update_from_output()
        trace: list[tuple[Any, ...]]
        batch_queue: Any = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.log, self.trace, self._calls = [], [], {}

        def schedule(self, *args: Any, **kwargs: Any) -> Any:
            held = {
                _rid(r.request_id): r.num_output_placeholders
                for r in self.running
                if getattr(r, "num_output_placeholders", 0)
            }
            in_flight = len(self.batch_queue) if self.batch_queue is not None else 0
            out = super().schedule(*args, **kwargs)
            scheduled = {str(_rid(r)): n for r, n in out.num_scheduled_tokens.items()}
            preempted = sorted(_rid(r) for r in (out.preempted_req_ids or ()))
            pool = self.kv_cache_manager.block_pool
            waiting = len(self.waiting) + len(getattr(self, "kv_holding_waiting", ()))
            self.log.append(
                [scheduled, preempted, pool.get_num_free_blocks(), waiting, len(self.running)]
            )
            self._calls[id(out)] = len(self.log) - 1
            self.trace.append(
                ("S", len(self.log) - 1, scheduled, held, pool.get_num_free_blocks(), in_flight)
            )
            return out

        def update_from_output(self, scheduler_output: Any, model_output: Any) -> Any:
            before = set(self.finished_req_ids)
            result = super().update_from_output(scheduler_output, model_output)
            finished = sorted(_rid(r) for r in self.finished_req_ids - before)
            free = self.kv_cache_manager.block_pool.get_num_free_blocks()
            call = self._calls.pop(id(scheduler_output), None)
            self.trace.append(("U", call, finished, free))
            return result

    return Recording


class Reference:
    """One vLLM engine per (block size, model length, async mode), reused across scenarios."""

    def __init__(self) -> None:
        self._engines: dict[tuple[int, int, bool], Any] = {}

    def engine(self, scenario: Scenario) -> Any:
        from vllm import LLM
        from vllm.v1.core.sched.async_scheduler import AsyncScheduler
        from vllm.v1.core.sched.scheduler import Scheduler

        knobs = scenario.engine
        key = (knobs.block_size, knobs.max_model_len, knobs.async_scheduling)
        if key not in self._engines:
            for old in self._engines.values():
                del old
            self._engines.clear()
            base = AsyncScheduler if knobs.async_scheduling else Scheduler
            if knobs.async_scheduling:
                import cpu_async  # patches vLLM at runtime: its CPU platform turns async off

                cpu_async.enable()
            llm = LLM(
                model=str(MODEL), load_format="dummy", skip_tokenizer_init=True,
                dtype="float32", enforce_eager=True, seed=0, gpu_memory_utilization=0.2,
                block_size=knobs.block_size, max_model_len=knobs.max_model_len,
                num_gpu_blocks_override=ENGINE_BLOCKS, max_num_seqs=ENGINE_MAX_SEQS,
                max_num_batched_tokens=max(ENGINE_MAX_TOKENS, knobs.max_model_len),
                enable_prefix_caching=True, scheduler_cls=_recording_scheduler(base),
                async_scheduling=knobs.async_scheduling,
            )  # fmt: skip
            core = llm.llm_engine.engine_core.engine_core
            is_async = core.scheduler.vllm_config.scheduler_config.async_scheduling
            queue = core.batch_queue_size
            if (queue, bool(is_async)) != ((2, True) if knobs.async_scheduling else (1, False)):
                raise RuntimeError(
                    f"engine has batch queue {queue}, async {is_async}; "
                    f"the scenario asks async={knobs.async_scheduling}"
                )
            self._engines[key] = llm
        return self._engines[key]

    def run(self, scenario: Scenario) -> list[list[Any]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        llm = self.engine(scenario)
        engine = llm.llm_engine
        core = engine.engine_core.engine_core
        log = _install_scheduler(core, scenario)
        produced: dict[int, int] = {}
        pending = list(enumerate(scenario.requests))
        nxt, clock, calls = 0, 0, 0
        while nxt < len(pending) or engine.has_unfinished_requests():
            if not engine.has_unfinished_requests():
                clock = max(clock, pending[nxt][1].step)
            while nxt < len(pending) and pending[nxt][1].step <= clock:
                i, req = pending[nxt]
                # sampled (temperature 1): two requests never generate the same tokens
                # (greedy decoding would make duplicate prompts' outputs, and so their output
                # blocks, identical; simkv's generated tokens match nothing). A per-request
                # seed is not an option: the CPU sampler's generators have no offset
                params = SamplingParams(
                    max_tokens=req.output, min_tokens=req.output, ignore_eos=True,
                    detokenize=False, temperature=1.0,
                )  # fmt: skip
                engine.add_request(
                    f"r{i}", TokensPrompt(prompt_token_ids=list(req.prompt)), params,
                    priority=req.priority,
                )  # fmt: skip
                nxt += 1
            before = len(log)
            # with async scheduling a call may end without outputs: it scheduled step n+1
            # and left step n's output in the batch queue (EngineCore.step_with_batch_queue)
            for output in engine.step():
                if output.finished:
                    produced[_rid(output.request_id)] = len(output.outputs[0].token_ids)
            calls += 1
            if calls > STEP_LIMIT:
                raise RuntimeError(f"{scenario.name}: no end after {STEP_LIMIT} steps")
            if any(entry[0] for entry in log[before:]):
                clock += 1
        if core.batch_queue is not None:
            # async: the engine core steps on until its batch queue is empty and the finished
            # requests went out to the worker (EngineCore.run_busy_loop does the same), so
            # the next scenario's fresh scheduler never takes a stale batch's output; these
            # calls schedule nothing (idle entries in the log)
            while core.batch_queue or core.scheduler.has_requests():
                engine.step()
        requests = enumerate(scenario.requests)
        wrong = {i: produced.get(i) for i, r in requests if produced.get(i) != r.output}
        if wrong:
            raise RuntimeError(f"{scenario.name}: wrong output lengths {wrong}")
        return log


def _install_scheduler(core: Any, scenario: Scenario) -> list[list[Any]]:
    """A fresh scheduler on ``core`` with the scenario's knobs and pool; returns its log."""
    knobs = scenario.engine
    old = core.scheduler
    vllm_config = old.vllm_config
    sched_cfg = dataclasses.replace(
        vllm_config.scheduler_config,
        max_num_seqs=knobs.max_num_seqs,
        max_num_batched_tokens=knobs.max_num_batched_tokens,
        enable_chunked_prefill=knobs.enable_chunked_prefill,
        policy=knobs.policy,
        long_prefill_token_threshold=knobs.long_prefill_token_threshold,
        scheduler_reserve_full_isl=knobs.reserve_full_isl,
        max_model_len=knobs.max_model_len,
        is_encoder_decoder=False,
    )
    cache_cfg = dataclasses.replace(
        vllm_config.cache_config, enable_prefix_caching=knobs.enable_prefix_caching
    )
    cache_cfg.num_gpu_blocks = knobs.num_blocks
    config = dataclasses.replace(vllm_config, scheduler_config=sched_cfg, cache_config=cache_cfg)
    kv_config = dataclasses.replace(old.kv_cache_config, num_blocks=knobs.num_blocks)
    scheduler = type(old)(
        vllm_config=config,
        kv_cache_config=kv_config,
        structured_output_manager=old.structured_output_manager,
        block_size=old.block_size,
        hash_block_size=getattr(old.kv_cache_manager, "hash_block_size", None),
        log_stats=old.log_stats,
    )
    scheduler.batch_queue = core.batch_queue
    core.scheduler = scheduler
    return scheduler.log


def versions() -> dict[str, str]:
    import torch
    import vllm

    return {"vllm": vllm.__version__, "torch": torch.__version__}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    source, target = Path(argv[0]), Path(argv[1])
    scenarios = [Scenario.from_json(d) for d in read_jsonl_gz(source)]
    reference = Reference()
    started = time.monotonic()
    # scenarios sharing an engine run together (each new engine costs seconds)
    order = sorted(
        scenarios,
        key=lambda s: (s.engine.block_size, s.engine.max_model_len, s.engine.async_scheduling),
    )
    logs = {}
    for k, scenario in enumerate(order, 1):
        log = reference.run(scenario)
        logs[scenario.name] = log
        print(f"[{k}/{len(scenarios)}] {scenario.name} ({scenario.family}): {len(log)} steps, "
              f"{time.monotonic() - started:.0f} s", file=sys.stderr)  # fmt: skip
    records = [{"name": s.name, "steps": logs[s.name]} for s in scenarios]
    head = {"versions": versions(), "scenarios": len(records)}
    write_jsonl_gz(target, [head, *records])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
