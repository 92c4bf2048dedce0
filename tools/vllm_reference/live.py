"""Serve timed arrivals through a real vLLM engine on the CPU and record every request's times.

Runs inside the reference virtualenv (``make vllm-reference`` builds it), never inside simkv's::

    .venv-vllm/bin/python tools/vllm_reference/live.py OUT_DIR --model small-llama \\
        --mix chat --rates 1,2,3 --requests 200 --repeat 2

Each (rate, repeat) becomes one run folder ``OUT_DIR/<model>-<mix>-r<rate>-<repeat>/`` in the
measured-run format simkv reads (:mod:`simkv.measured.llmservingsim`): ``requests.jsonl`` with
the engine core's own timestamps of every request (``queued_ts``, ``scheduled_ts``,
``first_token_ts``, ``last_token_ts``, vLLM's ``RequestStateStats``), ``meta.json`` with the
engine settings, the machine and its load average before and after, and ``timeseries.csv``
(running, waiting and KV usage once a second; the two throughput columns are not logged and
read 0), and ``steps.csv``: every engine step's wall time and what it computed.

The engine runs in process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) with one OpenMP thread; on a
shared machine, run it at a high priority (``nice -n -15``, as the bundled runs were; meta.json
records the niceness) so other work cannot starve it. The
driver submits each request when the wall clock reaches its arrival (Poisson, seeded) and calls
``engine.step()`` in a loop; it sleeps only when the engine is idle. As in vLLM's API server,
a request that arrives during a step enters the scheduler after that step, so ``queued_ts`` is
the arrival simkv replays. There is no API server, tokenizer or detokenizer (prompts are token
ids; ``skip_tokenizer_init``): the times are the engine's alone. Prompts are random token ids
(no two prompts share a block), outputs decode exactly their length (EOS ignored). The prefix
cache is emptied before each run, so a repeat serves the same requests from a cold cache.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

# run as a script inside vLLM's virtualenv: this folder is on sys.path, simkv is not
from arrivals import MIXES, Request, plan

HERE = Path(__file__).resolve().parent
MODELS = ("tiny-llama", "small-llama")
ENGINE = {  # the engine's settings; meta.json records them
    "block_size": 32,
    "num_gpu_blocks_override": 2048,
    "max_num_seqs": 32,
    "max_num_batched_tokens": 1024,
    "max_model_len": 2048,
}
DRAIN_LIMIT_S = 900.0  # a run that does not drain by then is stopped and reported, never hangs


STEP_COLUMNS = ("t_s", "step_time_ms", "prefill_tokens", "decode_tokens", "num_seqs",
                "kv_read_tokens", "prefill_kv_tokens", "attention_pairs")  # fmt: skip
"""``steps.csv``: per engine step, its start (s from the run's start), its wall time and what it
computed, in the columns of simkv's generic step CSV (:mod:`simkv.calibrate.steps`)."""


def _step_scheduler() -> type:
    """vLLM's scheduler, keeping what each ``schedule()`` call scheduled (``work``)."""
    from vllm.v1.core.sched.scheduler import Scheduler

    class Steps(Scheduler):  # type: ignore[misc, valid-type]
        work: list[int] | None = None

        def schedule(self, *args: Any, **kwargs: Any) -> Any:
            out = super().schedule(*args, **kwargs)
            prefill = decode = kv = prefill_kv = pairs = 0
            for rid, n in out.num_scheduled_tokens.items():
                req = self.requests[rid]
                before = req.num_computed_tokens - n  # schedule() has advanced it by n
                if before >= req.num_prompt_tokens:  # reads its context and its new token
                    decode += n
                    kv += before + n
                else:  # a prefill chunk reads the cached context; its own KV is computed
                    prefill += n
                    kv += before
                    prefill_kv += before
                    pairs += n * before + n * (n + 1) // 2
            seqs = len(out.num_scheduled_tokens)
            self.work = [prefill, decode, seqs, kv, prefill_kv, pairs]
            return out

    return Steps


def build(model: str) -> Any:
    from vllm import LLM

    return LLM(
        model=str(HERE / model), load_format="dummy", skip_tokenizer_init=True,
        dtype="float32", enforce_eager=True, seed=0, gpu_memory_utilization=0.2,
        enable_prefix_caching=True, disable_log_stats=False, scheduler_cls=_step_scheduler(),
        **ENGINE,
    )  # fmt: skip


def serve(llm: Any, requests: list[Request]) -> tuple[list, list, list]:
    """Submit ``requests`` at their arrival times; (per-request rows, per-second series, steps)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    engine = llm.llm_engine
    core = engine.engine_core.engine_core
    rows: dict[int, dict[str, Any]] = {}
    series: list[list[float]] = []
    steps: list[list[float]] = []
    start = time.monotonic()
    nxt, tick = 0, 1.0
    while nxt < len(requests) or engine.has_unfinished_requests():
        now = time.monotonic() - start
        while nxt < len(requests) and requests[nxt][0] <= now:
            _, prompt, output = requests[nxt]
            params = SamplingParams(
                max_tokens=output, min_tokens=output, ignore_eos=True, detokenize=False,
                temperature=1.0,
            )  # fmt: skip
            engine.add_request(f"bench-{nxt}", TokensPrompt(prompt_token_ids=prompt), params)
            nxt += 1
        if now >= tick:
            sched = core.scheduler
            usage = sched.kv_cache_manager.usage * 100
            series.append([round(tick, 3), len(sched.running), len(sched.waiting), usage])
            tick += 1.0
        if not engine.has_unfinished_requests():
            time.sleep(max(0.0, min(requests[nxt][0] - now, tick - now)))
            continue
        if now > requests[-1][0] + DRAIN_LIMIT_S:
            raise RuntimeError(f"no drain {DRAIN_LIMIT_S:.0f} s after the last arrival")
        core.scheduler.work = None
        began = time.monotonic()
        outputs = engine.step()
        took = time.monotonic() - began
        if core.scheduler.work is not None and core.scheduler.work[2]:
            steps.append([round(began - start, 6), round(took * 1e3, 4), *core.scheduler.work])
        for out in outputs:
            if out.finished:
                i = int(out.request_id.split("-")[1])
                m = out.metrics
                if len(out.outputs[0].token_ids) != requests[i][2]:
                    raise RuntimeError(f"bench-{i}: wrong output length")
                rows[i] = {
                    "request_id": f"bench-{i}", "input_toks": len(requests[i][1]),
                    "output_toks": requests[i][2], "arrival_time": start + requests[i][0],
                    "queued_ts": m.queued_ts, "scheduled_ts": m.scheduled_ts,
                    "first_token_ts": m.first_token_ts, "last_token_ts": m.last_token_ts,
                }  # fmt: skip
    return [rows[i] for i in sorted(rows)], series, steps


def resolved(llm: Any) -> dict[str, Any]:
    """The settings the engine resolved (the keys simkv reads from ``resolved_config``)."""
    config = llm.llm_engine.engine_core.engine_core.scheduler.vllm_config
    sched, cache = config.scheduler_config, config.cache_config
    names = (
        "max_num_seqs",
        "max_num_batched_tokens",
        "enable_chunked_prefill",
        "policy",
        "async_scheduling",
        "long_prefill_token_threshold",
        "scheduler_reserve_full_isl",
    )
    return {
        "scheduler_config": {name: getattr(sched, name, None) for name in names},
        "cache_config": {"block_size": cache.block_size, "num_gpu_blocks": cache.num_gpu_blocks,
                         "enable_prefix_caching": cache.enable_prefix_caching},
        "model_config": {"max_model_len": config.model_config.max_model_len},
    }  # fmt: skip


def meta(llm: Any, model: str, rate: float, mix: str, seed: int, loads: list) -> dict[str, Any]:
    import torch
    import vllm

    config = json.loads((HERE / model / "config.json").read_text())
    return {
        "schema_version": 1,
        "model": model,
        "model_config": config,
        "vllm_version": vllm.__version__,
        "engine_kwargs": {
            "model": model,
            "tensor_parallel_size": 1,
            "data_parallel_size": 1,
            "max_num_seqs": ENGINE["max_num_seqs"],
            "max_num_batched_tokens": ENGINE["max_num_batched_tokens"],
            "max_model_len": ENGINE["max_model_len"],
            "dtype": "float32",
            "enable_chunked_prefill": True,
            "seed": 0,
        },
        "kv_cache": {
            "num_gpu_blocks": ENGINE["num_gpu_blocks_override"],
            "block_size": ENGINE["block_size"],
            "enable_prefix_caching": True,
        },
        "resolved_config": resolved(llm),
        "workload": {"rate": rate, "mix": mix, "lengths": MIXES[mix], "seed": seed},
        "hardware": {
            "device_name": "cpu-1thread",
            "cpu": platform.processor() or platform.machine(),
            "cpu_model": cpu_model(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "omp_threads": os.environ["OMP_NUM_THREADS"],
            "torch_version": torch.__version__,
            "nice": os.nice(0),
            "load_average_before": loads[0],
            "load_average_after": loads[1],
        },
    }


def cpu_model() -> dict[str, Any]:
    """The CPU the run was served on (``/proc/cpuinfo``'s first processor): its name, family,
    model and whether it has AVX-512, which sets the fp32 matmul rate one thread reaches (the
    same requests ran 1.9 times faster per prefill token on a family 25 model 17 CPU with
    AVX-512 than on the family 25 model 1 CPU without it; traces/measured/README.md)."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    for line in text.split("\n\n")[0].splitlines():
        key, _, val = line.partition(":")
        fields[key.strip()] = val.strip()
    return {
        "name": fields.get("model name", ""),
        "family": fields.get("cpu family", ""),
        "model": fields.get("model", ""),
        "avx512f": "avx512f" in fields.get("flags", "").split(),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", choices=MODELS, default="small-llama")
    ap.add_argument("--mix", choices=sorted(MIXES), default="chat")
    ap.add_argument("--rates", default="1,2,3", help="requests/s, comma-separated")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=1, help="serve each rate's requests again")
    ap.add_argument(
        "--first-repeat",
        type=int,
        default=0,
        help="number the repeats from this one (a later session's extra repeat)",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    llm = build(args.model)
    serve(llm, plan(2.0, 8, args.mix, 999))  # warm-up: first calls allocate and fault pages
    for rep in range(args.first_repeat, args.first_repeat + args.repeat):
        for rate in (float(r) for r in args.rates.split(",")):
            name = f"{args.model}-{args.mix}-r{rate:g}-{rep}"
            # the same requests again must not find their prompts cached by the previous run
            if not llm.reset_prefix_cache():
                raise RuntimeError("the engine did not reset its prefix cache")
            loads = [os.getloadavg()]
            started = time.monotonic()
            rows, series, steps = serve(llm, plan(rate, args.requests, args.mix, args.seed))
            loads.append(os.getloadavg())
            folder = args.out / name
            folder.mkdir(parents=True, exist_ok=True)
            info = meta(llm, args.model, rate, args.mix, args.seed, loads)
            (folder / "meta.json").write_text(json.dumps(info, indent=2) + "\n")
            with open(folder / "requests.jsonl", "w") as f:
                f.writelines(json.dumps(row) + "\n" for row in rows)
            lines = ["t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct"]
            lines += [f"{t},0,0,{r},{w},{u:.2f}" for t, r, w, u in series]
            (folder / "timeseries.csv").write_text("\n".join(lines) + "\n")
            table = [",".join(STEP_COLUMNS), *(",".join(map(str, step)) for step in steps)]
            (folder / "steps.csv").write_text("\n".join(table) + "\n")
            took = time.monotonic() - started
            print(f"{name}: {len(rows)} requests in {took:.0f} s, load {loads}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
