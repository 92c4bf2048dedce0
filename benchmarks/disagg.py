"""Prefill/decode disaggregation, the evidence: the transfer arithmetic checked against the
closed form, and DistServe's qualitative result (disaggregation serves more SLO-meeting
requests per GPU than colocation under tight SLOs, and the gap closes as they loosen).

    .venv/bin/python benchmarks/disagg.py                 # prints the tables
    .venv/bin/python benchmarks/disagg.py --write-docs    # and rewrites docs/disaggregation.md

**Transfer arithmetic.** ``n`` requests of ``tokens`` prompt tokens arrive at once on ``n``
prefill replicas and one decode replica (Llama-2-7B's 524,288 KV bytes per token, a step table
of 10 + tokens ms, a link of ``GB_PER_S`` and ``LATENCY_US``): every transfer starts at the
prefill's end and must take ``latency + n × bytes / bandwidth`` (the decode NIC shared by
``n``), to the float.

**DistServe's setting** (Zhong et al., OSDI 2024, the chatbot workload): OPT-13B on
A100-80GB, ShareGPT-like lengths (the PagedAttention paper's fit, ``configs/paper/``), whole
prefills as in DistServe's instances and its vLLM baseline (``enable_chunked_prefill: false``:
the colocated replicas batch a prompt's whole prefill with their decodes), SLOs of
p99 TTFT ``TTFT_MS`` and p99 TPOT ``TPOT_MS`` scaled by 1, 2 and 4. For each scale,
``simkv capacity --gpus 4``'s split search (:mod:`simkv.capacity.splits`): every P:D split of
4 GPUs and 4 colocated replicas, the highest rate each meets its SLOs at, per GPU.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import tempfile
import time
from pathlib import Path

import yaml
from doc_blocks import markdown_table

from simkv.capacity.run import CapacityOptions
from simkv.capacity.splits import Budget, best, find_splits, plan_splits
from simkv.outputs import write_file
from simkv.run import load_config, simulate

ROOT = Path(__file__).resolve().parents[1]

DOC = ROOT / "docs" / "disaggregation.md"
GB_PER_S = 0.524288  # one token of Llama-2-7B's KV per ms
LATENCY_US = 1000.0
TTFT_MS, TPOT_MS = 250.0, 100.0  # DistServe's chatbot SLOs for OPT-13B
SCALES = (1.0, 2.0, 4.0)
BUDGET = 4
RATE_MAX = 64.0


def _tiny(folder: Path, requests: list[tuple[float, int, int]], prefill: int) -> Path:
    """A config file of a fleet of ``prefill`` prefill replicas and one decode replica."""
    trace, table = folder / "trace.csv", folder / "steps.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n"
                     + "".join(f"{a},{p},{o}\n" for a, p, o in requests))  # fmt: skip
    table.write_text("num_tokens,step_time_ms\n1,11\n100,110\n")
    data = {
        "name": "analytic", "model": {"preset": "llama-2-7b", "max_model_len": 64},
        "gpu": "a100-80gb", "kv_cache": {"block_size": 4, "num_blocks": 256},
        "scheduler": {"kind": "vllm_v1"}, "cost_model": {"kind": "table", "path": str(table)},
        "workload": {"kind": "trace", "path": str(trace), "format": "generic",
                     "columns": {"arrival_s": "arrival_s"}},
        "fleet": {
            "router": {"kind": "least_outstanding"},
            "disaggregation": {"link": {"kind": "ib_ndr", "gb_per_s": GB_PER_S,
                                        "latency_us": LATENCY_US}},
            "replicas": [{"role": "prefill", "count": prefill}, {"role": "decode"}],
        },
    }  # fmt: skip
    path = folder / "analytic.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def analytic(folder: Path) -> list[list[str]]:
    """One row per (concurrent transfers, prompt tokens): expected and simulated times."""
    rows = []
    for n in (1, 2, 4):
        for tokens in (8, 40):
            path = _tiny(folder, [(0.0, tokens, 2)] * n, n)
            out = simulate(load_config(path), folder)
            req = out.requests
            took = (req["kv_arrive_s"] - req["kv_send_s"]).to_numpy()
            nbytes = tokens * out.config.model.kv_bytes_per_token
            want = LATENCY_US * 1e-6 + n * nbytes / (GB_PER_S * 1e9)
            exact = all(math.isclose(t, want, rel_tol=1e-12) for t in took)
            rows.append([str(n), str(tokens), f"{nbytes:,}", f"{want * 1e3:.6f}",
                         f"{took.max() * 1e3:.6f}", "yes" if exact else "NO"])  # fmt: skip
    return rows


def _distserve_config(folder: Path, requests: int, scale: float) -> Path:
    data = {
        "name": f"distserve-x{scale:g}", "seed": 0, "model": "opt-13b", "gpu": "a100-80gb",
        "scheduler": {"kind": "vllm_v1", "enable_chunked_prefill": False},
        "workload": {"kind": "synthetic", "num_requests": requests,
                     "arrival": {"kind": "poisson", "rate": 4.0},
                     "prompt_tokens": {"kind": "lognormal", "mu": 4.382, "sigma": 1.273,
                                       "max": 1024},
                     "output_tokens": {"kind": "lognormal", "mu": 5.481, "sigma": 0.848,
                                       "max": 1023}},
        "fleet": {"router": {"kind": "least_outstanding"},
                  "disaggregation": {"link": "nvlink3"},
                  "replicas": [{"name": "prefill", "role": "prefill"},
                               {"name": "decode", "role": "decode"}]},
        "slo": {"ttft_ms": TTFT_MS * scale, "tpot_ms": TPOT_MS * scale},
    }  # fmt: skip
    path = folder / f"distserve-x{scale:g}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def distserve(folder: Path, requests: int) -> tuple[list[list[str]], list[str]]:
    """The split search at each SLO scale: a row per split, and a sentence per scale."""
    opts = CapacityOptions(rate_min=0.5, rate_max=RATE_MAX, tolerance=0.03, per_round=3)
    rows, verdicts = [], []
    for scale in SCALES:
        path = _distserve_config(folder, requests, scale)
        budget = Budget(gpus=BUDGET)
        splits = plan_splits(path, [], budget)
        results = find_splits(path, [], folder / f"x{scale:g}", opts, splits, budget)
        top = best(results)
        colocated = next(r for r in results if r.split.prefill == 0)
        for r in results:
            rate = "—" if r.rate is None else f"{r.rate:.2f}"
            per_gpu = "—" if r.goodput_per_gpu is None else f"{r.goodput_per_gpu:.2f}"
            mark = " (best)" if r is top else ""
            rows.append([f"{scale:g}×", f"{TTFT_MS * scale:g} / {TPOT_MS * scale:g}",
                         r.split.name + mark, rate, per_gpu])  # fmt: skip
        split = [r for r in results if r.split.prefill > 0 and r.goodput_per_gpu is not None]
        top_split = max(split, key=lambda r: r.goodput_per_gpu or 0.0, default=None)
        if top_split is None or not colocated.goodput_per_gpu:
            verdicts.append(f"SLOs ×{scale:g}: no factor (a side met no rate)")
            continue
        factor = (top_split.goodput_per_gpu or 0.0) / colocated.goodput_per_gpu
        verdicts.append(f"SLOs ×{scale:g}: the best split ({top_split.split.name}) serves "
                        f"{factor:.2f}× the colocated goodput per GPU")  # fmt: skip
    return rows, verdicts


def render(analytic_rows: list[list[str]], ds_rows: list[list[str]], verdicts: list[str],
           wall_s: float, requests: int) -> str:  # fmt: skip
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    return "\n".join(
        [
            "# Prefill/decode disaggregation: the evidence",
            "",
            "Generated by `.venv/bin/python benchmarks/disagg.py --write-docs` (its docstring "
            "states the protocol); do not edit by hand. The guide is "
            "[fleets.md](fleets.md#prefilldecode-disaggregation).",
            "",
            f"* wall time {wall_s:.0f} s, load average {load} at the end, {when}",
            "",
            "## Transfer arithmetic",
            "",
            f"n transfers start at once into one decode replica's NIC over a link of {GB_PER_S} "
            f"GB/s and {LATENCY_US:g} µs: each must take latency + n × bytes / bandwidth.",
            "",
            markdown_table(
                [
                    "concurrent",
                    "tokens",
                    "bytes each",
                    "expected ms",
                    "simulated ms",
                    "equal to the float",
                ],
                analytic_rows,
            ),
            "",
            "## DistServe's setting: OPT-13B chat on A100-80GB",
            "",
            f"{requests} ShareGPT-like requests per run, KV over NVLink 3; the highest "
            f"Poisson rate meeting p99 TTFT and p99 TPOT, for every split of {BUDGET} GPUs "
            f"and {BUDGET} colocated replicas.",
            "",
            markdown_table(
                ["SLO scale", "TTFT / TPOT ms", "split", "req/s", "req/s per GPU"], ds_rows
            ),
            "",
            *[f"* {v}" for v in verdicts],
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--requests", type=int, default=1500)
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "a").mkdir()
        analytic_rows = analytic(folder / "a")
        ds_rows, verdicts = distserve(folder, args.requests)
    text = render(analytic_rows, ds_rows, verdicts, time.perf_counter() - started, args.requests)
    print(text)
    if args.write_docs:
        write_file(DOC, text)
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
