"""simkv beside splitwise-sim on splitwise-sim's own setting: same trace, model, hardware,
measured step times and cluster shapes; TTFT, TBT, E2E and throughput per configuration.

    .venv/bin/python benchmarks/splitwise_sim.py                # prints the tables
    .venv/bin/python benchmarks/splitwise_sim.py --write-docs   # and rewrites its block of
                                                                # docs/disaggregation.md

**The reference.** ``benchmarks/data/splitwise_sim_results.csv``: the public splitwise-sim
(Patel et al., ISCA'24; MIT licence), run unmodified by ``tools/splitwise_sim_reference.py``
(not run here: it needs a splitwise-sim checkout and its environment), with its provenance and
its semantics, file by file, in ``benchmarks/data/splitwise_sim_README.md``. Setting:
Llama-2-70B, 4 DGX-A100 (one TP-8 instance each), splitwise's measured A100 table
(``traces/measured/splitwise/perf_model_a100.csv``, its ``data/perf_model.csv``), the first
1,000 requests of the Azure 2023 conversation trace at its own arrival times (``x1``) and 4×
denser (``x4``); the colocated baseline (``token_jsq``) and prompt:token splits 1:3, 2:2, 3:1
(``kv_jsq``: each pool joins the shortest queue; splitwise's own experiments use
``mixed_pool``, which lends machines between the pools: shown for reference, simkv's pools
are fixed).

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
import datetime
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from doc_blocks import markdown_table

from simkv.run import load_config, simulate

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "benchmarks" / "data" / "splitwise_sim_results.csv"
DOC = ROOT / "docs" / "splitwise-sim.md"
TRACE = ROOT / "traces" / "azure2023" / "AzureLLMInferenceTrace_conv.csv"
TABLES = ROOT / "traces" / "measured" / "splitwise"
SKUS = {"dgx-a100": ("a100-80gb", "ib_hdr"), "dgx-h100": ("h100-80gb", "ib_ndr")}
"""splitwise-sim's machine → simkv's GPU preset and the machine's InfiniBand generation
(DGX-A100: 8 × HDR 200 Gb/s; DGX-H100: 8 × NDR 400 Gb/s)."""
REQUESTS = 1000
RATES = {"x1": 1.0, "x4": 4.0}
SPLITWISE_TOKENS = 210_640  # (8 x 80 GiB - 135e9 B) / 2,621,440 B, splitwise's instance KV
SPLITWISE_GB_PER_S = 200 * 1024**3 / 1e9 / 8  # kv_jsq's 200 GiB/s an instance, per GPU
METRICS = ("ttft", "tbt", "e2e")


def table_path(sku: str) -> Path:
    """The Splitwise step table measured on machine ``sku``."""
    return TABLES / f"perf_model_{SKUS[sku][0].split('-')[0]}.csv"


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
    prompt_end = done["first_token_s"]
    if "kv_handoff_s" in done:
        prompt_end = done["kv_handoff_s"].fillna(done["first_token_s"])
    ttft = (prompt_end - done["arrival_s"]).to_numpy() * 1e3
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


def reference() -> pd.DataFrame:
    """The splitwise-sim rows simkv can stand beside: the baselines and the fixed pools (the
    machine kinds ``dgx-a100`` where the file predates its sku columns)."""
    ref = pd.read_csv(REFERENCE)
    for column in ("prompt_sku", "token_sku"):
        if column not in ref:
            ref[column] = "dgx-a100"
    return ref[ref["scheduler"].isin(["token_jsq", "kv_jsq"])].reset_index(drop=True)


def _label(ref: Any) -> str:
    def kind(sku: str) -> str:
        return SKUS[sku][0].split("-")[0].upper()

    if ref.prompt_machines == 0:
        return f"colocated {ref.mixed_machines} {kind(ref.token_sku)}"
    return (f"{ref.prompt_machines} {kind(ref.prompt_sku)} prompt : "
            f"{ref.token_machines} {kind(ref.token_sku)} token")  # fmt: skip


def compare(folder: Path) -> pd.DataFrame:
    """One row per (reference row, source): splitwise-sim, simkv matched, simkv vLLM."""
    rows = []
    for ref in reference().itertuples(index=False):
        base = {"config": _label(ref), "rate": ref.rate}
        rows.append({**ref._asdict(), **base, "source": "splitwise-sim"})
        for matched in (True, False):
            got = run(ref, matched, folder)
            rows.append({**base, "source": "simkv " + ("matched" if matched else "vLLM"), **got})
    return pd.DataFrame(rows)


def _ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _diff(got: float, want: float) -> str:
    return f"{(got - want) / want * 100:+.0f} %"


def table(df: pd.DataFrame) -> str:
    """Three rows per configuration and rate; Diff of simkv matched's p50s against the
    reference's."""
    rows = []
    for (config, rate), group in df.groupby(["config", "rate"], sort=False):
        ref = group.iloc[0]
        for r in group.itertuples(index=False):
            cells = [config if r.source == "splitwise-sim" else "", rate, r.source]
            for name in METRICS:
                cells.append(f"{_ms(getattr(r, f'{name}_p50_ms'))} / "
                             f"{_ms(getattr(r, f'{name}_p99_ms'))}")  # fmt: skip
            cells.append(f"{r.throughput_rps:.2f}")
            if r.source == "simkv matched":
                cells.append(" / ".join(_diff(getattr(r, f"{n}_p50_ms"), ref[f"{n}_p50_ms"])
                                        for n in METRICS))  # fmt: skip
            else:
                cells.append("")
            own = getattr(r, "own_ttft_p50_ms", float("nan"))
            cells.append("" if own != own else _ms(own))
            batch = getattr(r, "decode_batch", float("nan"))
            cells.append("" if batch != batch else f"{batch:.0f} / {_ms(r.decode_step_ms)}")
            rows.append(cells)
    header = ["configuration", "rate", "source", "TTFT p50 / p99, ms", "TBT p50 / p99, ms",
              "E2E p50 / p99, ms", "req/s", "Diff p50 TTFT / TBT / E2E",
              "simkv's own TTFT p50, ms", "decode steps: mean batch / ms"]  # fmt: skip
    return markdown_table(header, rows)


def _mixed_pool() -> str:
    ref = pd.read_csv(REFERENCE)
    rows = [[r.config, r.rate, f"{_ms(r.ttft_p50_ms)} / {_ms(r.ttft_p99_ms)}",
             f"{_ms(r.tbt_p50_ms)} / {_ms(r.tbt_p99_ms)}",
             f"{_ms(r.e2e_p50_ms)} / {_ms(r.e2e_p99_ms)}", f"{r.throughput_rps:.2f}",
             f"{r.requests_finished - r.kv_transfers}"]
            for r in ref[ref["scheduler"] == "mixed_pool"].itertuples()]  # fmt: skip
    header = ["configuration", "rate", "TTFT p50 / p99, ms", "TBT p50 / p99, ms",
              "E2E p50 / p99, ms", "req/s", "requests served without a transfer"]  # fmt: skip
    return markdown_table(header, rows)


def _decode_note(df: pd.DataFrame) -> str:
    """The decode price each simulator charges, from the table and the runs."""
    table_rows = pd.read_csv(table_path("dgx-a100"))
    ref = table_rows[(table_rows["model"] == "llama2-70b") & (table_rows["tensor_parallel"] == 8)
                     & (table_rows["prompt_size"] == 512)]  # fmt: skip
    by_batch = ref.groupby("batch_size")["token_time"].mean()
    sim = df[df["source"] == "simkv matched"]
    lo, hi = sim["decode_batch"].min(), sim["decode_batch"].max()
    ms_lo, ms_hi = sim["decode_step_ms"].min(), sim["decode_step_ms"].max()
    return (
        f"**Decode steps** (most of every E2E and all of TBT). The table measured a decode step "
        f"of Llama-2-70B at TP 8 after 512-token prompts at {by_batch.loc[1]:.1f} ms for one "
        f"request, {by_batch.loc[16]:.1f} ms for 16 and {by_batch.loc[64]:.1f} ms for 64. "
        "splitwise-sim looks a decode batch's *size* up on the table's *prompt-token* axis "
        "(`performance_model.py`, `get_iteration_duration`: `token_pred(number of decode tasks)` "
        "over `prompt_size × batch_size`), so its decode step is 42.6 ms for 1 request, 42.8 for "
        "64 and 45.0 for 512, whatever the context (its README). simkv prices the measured "
        "growth with the batch on top of the batch-1 time at the step's context "
        f"(`simkv/engine/phase_cost.py`): its decode steps here average {lo:.0f}-{hi:.0f} "
        f"requests and {ms_lo:.0f}-{ms_hi:.0f} ms. That is the TBT gap on every row, and through "
        "TBT the E2E gap; under load the dearer decode steps also hold memory longer and "
        "admit fewer new requests, which is where the tails part."
    )


def _per_token() -> str:
    """The table's prompt time per token at TP 8, at 2,048 tokens and at 8,192 (batched)."""
    rows = pd.read_csv(table_path("dgx-a100"))
    rows = rows[(rows["model"] == "llama2-70b") & (rows["tensor_parallel"] == 8)]
    tokens = rows["prompt_size"] * rows["batch_size"]
    cost = (rows["prompt_time"] / tokens).groupby(tokens).mean()
    return f"{cost.loc[2048]:.3f} ms a token at 2,048 tokens, {cost.loc[8192]:.3f} at 8,192"


def render(df: pd.DataFrame, wall_s: float, cpu_s: float) -> str:
    """The whole of docs/splitwise-sim.md."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    matched = df[df["source"] == "simkv matched"]
    preempted = int(matched["preempted"].sum())
    return "\n".join([
        "# simkv beside splitwise-sim",
        "",
        "Generated by `.venv/bin/python benchmarks/splitwise_sim.py --write-docs` (its docstring "
        "states the protocol; do not edit by hand). splitwise-sim's numbers are "
        "`benchmarks/data/splitwise_sim_results.csv`, from its public code run unmodified by "
        "`tools/splitwise_sim_reference.py`; `benchmarks/data/splitwise_sim_README.md` gives "
        "their provenance and splitwise-sim's semantics, file by file. The guide is "
        "[fleets.md](fleets.md#prefilldecode-disaggregation).",
        "",
        f"* simkv: {len(df) - len(reference())} runs in {wall_s:.0f} s wall, {cpu_s:.0f} s CPU; "
        f"load average {load} at the end, {when}",
        "",
        "**Setting.** Llama-2-70B on 4 DGX-A100 (one TP-8 instance each), Splitwise's measured "
        "A100 step table, the first 1,000 requests of the Azure 2023 conversation trace at their "
        "own arrival times (x1) and 4× denser (x4). *simkv matched* sets every knob simkv has as "
        "splitwise-sim assumes (full multi-head KV, its KV capacity, its step cap, its link, its "
        "routers); *simkv vLLM* is simkv's own defaults for the same fleets (the model's real "
        "grouped-query KV, vLLM V1's chunked prefill, InfiniBand HDR). TTFT is to the prompt's "
        "end, as splitwise-sim measures it; TBT is (E2E − TTFT) / (output − 1) per request.",
        "",
        table(df),
        "",
        "## Every difference, explained",
        "",
        "- **Prompts agree.** Where nothing queues (x1: colocated, 2:2, 3:1) the TTFT medians "
        "are within a millisecond or two: both price a prompt step through the same table rows "
        "(splitwise-sim: the median of the repeated rows, simkv: their mean).",
        "- " + _decode_note(df),
        "- **Where the first token is made.** splitwise-sim's prompt machine makes the first "
        "token, so its TTFT stops at the prompt's end. simkv follows vLLM's P/D path: the "
        "prefill replica runs a one-token request, the KV crosses, and the decode replica's "
        "first step makes the token the client sees (column *simkv's own TTFT*: the transfer "
        "and one decode step later). The table's TTFT columns use splitwise-sim's definition "
        "for both.",
        "- **The step cap.** splitwise-sim caps an iteration at 2,048 tokens and runs a longer "
        "prompt (92 of the 1,000) alone, dropping every running decode from that iteration. "
        "vLLM has no such step: without chunked prefill it refuses a token budget below the "
        "context length, so *matched* keeps the 2,048-token budget with chunked prefill (a long "
        "prompt runs in 2,048-token chunks beside the decodes).",
        "- **Mixed steps** (colocated). splitwise-sim prices a step holding prompts and decodes "
        "at 1.1 × the prompt time of (prompt tokens + decodes); simkv at its prefill part plus "
        "its decode part, less one step's fixed cost (`simkv/engine/phase_cost.py`).",
        "- **Memory.** splitwise-sim reserves prompt + output tokens when a prompt starts and "
        "otherwise queues (a KV transfer retries every second until the token machine has "
        "room: at 3:1 x4, 520 of its 1,000 transfers waited, up to 52 s). vLLM allocates blocks "
        "as tokens arrive and preempts by recompute when they run out: *matched*, with "
        f"splitwise-sim's 210,640 tokens an instance, preempted {preempted} times in all, on the "
        "loaded decode pools.",
        "- **Transfers** are not what separates the two here: at 214.7 GB/s an instance a "
        "1,000-token prompt's 2.6 GB take 12.2 ms in both (splitwise-sim gives each request a "
        "link of its own; simkv shares the NICs max-min among concurrent transfers).",
        "- **simkv vLLM** shows what splitwise-sim's assumptions change: Llama-2-70B's real KV "
        "is 1/8 of the multi-head size (8 KV heads), so an instance holds eight times the "
        "tokens and a hand-over moves an eighth of the bytes; and vLLM V1's default budget of "
        "8,192 tokens a step batches more prompt tokens per step, which this table prices "
        f"dearer per token at TP 8 ({_per_token()}): where one prompt machine is the "
        "bottleneck (1:3), TTFT grows several-fold against the 2,048-token cap.",
        "- **`mixed_pool`**, the scheduler of splitwise-sim's own experiments, lends machines "
        "between the pools when one is overloaded; simkv's pools are fixed, so its rows are not "
        "in the table above. splitwise-sim's figures for them:",
        "",
        _mixed_pool(),
        "",
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as folder:
        df = compare(Path(folder))
    text = render(df, time.perf_counter() - wall, time.process_time() - cpu)
    print(text)
    if args.write_docs:
        DOC.write_text(text, encoding="utf-8")
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
