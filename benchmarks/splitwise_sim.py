"""simkv beside splitwise-sim on splitwise-sim's own setting: same trace, model, hardware,
measured step times and cluster shapes; TTFT, TBT, E2E and throughput per configuration.

    .venv/bin/python benchmarks/splitwise_sim.py                # prints the tables
    .venv/bin/python benchmarks/splitwise_sim.py --write-docs   # and rewrites its block of
                                                                # docs/disaggregation.md

**The reference.** ``benchmarks/data/splitwise_sim_results.csv``: the public splitwise-sim
(Patel et al., ISCA'24; MIT licence), run unmodified by ``tools/splitwise_sim_reference.py``
(not run here: it needs a splitwise-sim checkout and its environment), with its provenance and
its semantics, file by file, in ``benchmarks/data/splitwise_sim_README.md``. Setting:
Llama-2-70B at TP 8 on DGX machines, splitwise's measured tables
(``traces/measured/splitwise/perf_model_a100.csv`` and ``_h100.csv``, its
``data/perf_model.csv``), the first 1,000 requests of the Azure 2023 conversation trace at
its own arrival times (``x1``) and 4× denser (``x4``). On 4 DGX-A100: the colocated baseline
(``token_jsq``) and prompt:token splits 1:3, 2:2, 3:1 (``kv_jsq``: each pool joins the
shortest queue). At the cost of 4 DGX-H100 (splitwise-sim's isocost ratio, 8 DGX-A100): 4
H100 and 8 A100 colocated, 2:2 H100 (Splitwise-HH), 4:4 A100 (Splitwise-AA), and 2 H100
prompt machines with 4 A100 token machines (Splitwise-HA, each pool priced by its own
machine's table). splitwise-sim's own experiments use ``mixed_pool``, which lends machines
between the pools: shown for reference, simkv's pools are fixed.

**simkv, two ways.** *matched*: every knob simkv has set as splitwise-sim assumes — the KV of
Llama-2-70B at full multi-head size (``num_kv_heads: 64``, 2,621,440 B a token, as splitwise's
``estimate_kv_cache_size``), its KV capacity (8 × 80 GiB less 135 GB of weights: 210,640
tokens an instance), whole prompts (no chunking), 512 sequences a step, its transfer
(214.7 GB/s an instance, no latency, ``kv_jsq``'s 200 GiB/s) and its routers (baseline: the
fewest outstanding tokens; split pools: the fewest outstanding requests), no context limit
(``max_model_len`` 8,192). *vLLM*: simkv's own defaults for the same model, GPU, table and
fleets — Llama-2-70B's real grouped-query KV (8 KV heads), the KV capacity vLLM's memory
profile leaves, vLLM V1's chunked prefill, InfiniBand HDR at 25 GB/s a GPU.
Metrics as the reference computes them: TTFT to the first token (made by the prefill), E2E to
the last, TBT ``(E2E − TTFT) / (output − 1)`` per request, percentiles by linear
interpolation, throughput over the first arrival to the last finish.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from doc_blocks import publish
from splitwise_sim_doc import METRICS, ROOT, SKUS, label, reference, render, table_path

from simkv.metrics.disagg import prompt_end_s
from simkv.run import load_config, simulate

DOC = ROOT / "docs" / "splitwise-sim.md"
TRACE = ROOT / "traces" / "azure2023" / "AzureLLMInferenceTrace_conv.csv"
REQUESTS = 1000
RATES = {"x1": 1.0, "x4": 4.0}
SPLITWISE_TOKENS = 210_640  # (8 x 80 GiB - 135e9 B) / 2,621,440 B, splitwise's instance KV
SPLITWISE_GB_PER_S = 200 * 1024**3 / 1e9 / 8  # kv_jsq's 200 GiB/s an instance, per GPU


def _group(sku: str, count: int, role: str | None = None) -> dict[str, Any]:
    """``count`` TP-8 replicas of machine ``sku``, priced by its own table."""
    group: dict[str, Any] = {"count": count, "gpu": SKUS[sku][0],
                             "cost_model": {"kind": "table", "path": str(table_path(sku)),
                                            "model": "llama2-70b"}}  # fmt: skip
    if role is not None:
        group.update(name="prompt" if role == "prefill" else "token", role=role)
    return group


def _fleet(ref: Any, matched: bool) -> dict[str, Any]:
    """A reference row's machines: colocated (no prompt machines) or two pools."""
    if ref.prompt_machines == 0:
        router = "shortest_queue_tokens" if matched else "least_outstanding"
        return {"router": {"kind": router},
                "replicas": [_group(ref.token_sku, ref.mixed_machines)]}  # fmt: skip
    # the slower end's NICs bound a hand-over between two machine kinds
    kind = min(SKUS[ref.prompt_sku][1], SKUS[ref.token_sku][1])  # ib_hdr < ib_ndr
    link = ({"kind": kind, "gb_per_s": SPLITWISE_GB_PER_S, "latency_us": 0}
            if matched else {"kind": kind})  # fmt: skip
    return {
        "router": {"kind": "least_outstanding"},
        "disaggregation": {"link": link, "prefill_router": {"kind": "least_outstanding"}},
        "replicas": [_group(ref.prompt_sku, ref.prompt_machines, "prefill"),
                     _group(ref.token_sku, ref.token_machines, "decode")],
    }  # fmt: skip


def config(ref: Any, matched: bool) -> dict[str, Any]:
    """The simkv config of one reference row (module docstring: *matched* or *vLLM*)."""
    model: dict[str, Any] = {"preset": "llama-2-70b", "max_model_len": 8192}
    scheduler: dict[str, Any] = {"kind": "vllm_v1"}
    kv: dict[str, Any] = {"block_size": 16}
    if matched:
        model["num_kv_heads"] = 64
        kv["num_blocks"] = SPLITWISE_TOKENS // 16
        scheduler.update(max_num_seqs=512, max_num_batched_tokens=2048)
    top = _group(ref.token_sku, 1)
    return {
        "name": f"{ref.config}-{ref.rate}-{'matched' if matched else 'vllm'}",
        "seed": 0, "model": model, "gpu": top["gpu"], "parallel": {"tensor_parallel": 8},
        "kv_cache": kv, "scheduler": scheduler, "cost_model": top["cost_model"],
        "workload": {"kind": "trace", "path": str(TRACE), "limit": REQUESTS,
                     "time_scale": 1.0 / RATES[ref.rate]},
        "fleet": _fleet(ref, matched),
    }  # fmt: skip


def metrics(requests: pd.DataFrame, steps: pd.DataFrame) -> dict[str, float]:
    """The reference's columns (``tools/splitwise_sim_reference.py``) from a run's frames,
    TTFT as the reference measures it: to the prompt's end (a disaggregated request's
    ``kv_handoff_s``, where splitwise-sim's prompt machine makes the first token); simkv's
    own TTFT (vLLM's: the decode replica's first step makes the token the client sees) is
    ``own_ttft_p50_ms``. Also the decode-only steps' mean batch and duration."""
    done = requests[requests["status"] == "finished"]
    ttft = (prompt_end_s(done) - done["arrival_s"]).to_numpy() * 1e3
    e2e = (done["finish_s"] - done["arrival_s"]).to_numpy() * 1e3
    out = done["output_tokens"].to_numpy()
    many = out > 1
    tbt = (e2e[many] - ttft[many]) / (out[many] - 1)
    row: dict[str, float] = {"requests_finished": float(len(done))}
    for name, values in zip(METRICS, (ttft, tbt, e2e), strict=True):
        for p in (50, 90, 99):
            row[f"{name}_p{p}_ms"] = float(np.percentile(values, p))
    own = (done["first_token_s"] - done["arrival_s"]).to_numpy() * 1e3
    row["own_ttft_p50_ms"] = float(np.percentile(own, 50))
    span = float(done["finish_s"].max() - requests["arrival_s"].min())
    row["throughput_rps"] = len(done) / span
    row["throughput_out_tok_s"] = float(out.sum()) / span
    decode = steps[(steps["prefill_tokens"] == 0) & (steps["decode_tokens"] > 0)]
    row["decode_batch"] = float(decode["batch_size"].mean())
    row["decode_step_ms"] = float(decode["duration_s"].mean() * 1e3)
    row["preempted"] = float(steps["preempted"].sum())
    return row


def run(ref: Any, matched: bool, folder: Path) -> dict[str, float]:
    """Simulate reference row ``ref``'s configuration and measure it as the reference does."""
    data = config(ref, matched)
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    out = simulate(load_config(path), folder / data["name"])
    return metrics(out.requests, out.steps)


def compare(folder: Path) -> pd.DataFrame:
    """One row per (reference row, source): splitwise-sim, simkv matched, simkv vLLM."""
    rows = []
    for ref in reference().itertuples(index=False):
        base = {"config": label(ref), "rate": ref.rate}
        rows.append({**ref._asdict(), **base, "source": "splitwise-sim"})
        for matched in (True, False):
            got = run(ref, matched, folder)
            rows.append({**base, "source": "simkv " + ("matched" if matched else "vLLM"), **got})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as folder:
        df = compare(Path(folder))
    text = render(df, time.perf_counter() - wall, time.process_time() - cpu)
    publish(text, DOC, args.write_docs)


if __name__ == "__main__":
    main()
