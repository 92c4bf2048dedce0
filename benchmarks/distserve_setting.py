"""DistServe's chatbot setting (Zhong et al., OSDI 2024; github.com/LLMServe/DistServe), for
``benchmarks/disagg.py``: the layouts, the workload, the judge and the goodput search.

Every choice and where it comes from (paths are in the DistServe repository):

* **Model, GPU, placement.** OPT-13B on A100-80GB; DistServe's OPT-13B instance is a prefill
  replica at TP 2 and a decode replica at TP 1, 3 GPUs
  (``evaluation/2-benchmark-serving/2-start-api-server.py``, ``MODEL_TO_PARALLEL_PARAMS``:
  ``(2, 1, 1, 1)``), against one vLLM replica at TP 1 on 1 GPU; its plots divide each
  system's rate by its GPUs (``evaluation/ae-scripts/e2e/_plot.py``: ``Backend(..., 3)`` and
  ``Backend("vllm", ..., 1)``). Here the splits of :data:`GPUS` GPUs that
  :func:`simkv.capacity.split_plan.plan_splits` gives at prefill TP 1 or 2 and decode TP 1
  (DistServe's p1tp2-d1tp1 among them), one vLLM replica (DistServe's baseline) and
  :data:`GPUS` of them behind a ``least_outstanding`` router, each rate over its GPUs.
* **Engine and step times.** Every replica's step times are DistServe's own A100 profile of
  the vLLM it compared against (``traces/measured/distserve/profiler-a100-80g.vllm.json``,
  ``cost_model: {kind: table}``; ``simdistserve`` prices vLLM with it), on both sides, so only
  placement differs. DistServe's own engine is faster per step (its
  ``profiler-a100-80g.distserve.json`` has lower intercepts: decode at TP 1 19.9 against
  23.5 ms), which this choice does not give the split. The colocated replicas run
  ``vllm_v0`` (a step is all prefills or all decodes, prefills first, no chunking: the vLLM
  0.2 of 2023 DistServe ran, ``--engine-use-ray --worker-use-ray``) with that vLLM's flags
  (``--max-num-batched-tokens 16384 --max-num-seqs 1024 --block-size 16
  --gpu-memory-utilization 0.95 --swap-space 16``); the split's replicas run ``vllm_v1``
  without chunked prefill (simkv's P/D path is vLLM V1's), a prefill-only replica batching
  whole prompts up to DistServe's ``--context-max-batch-size 128
  --context-max-tokens-per-batch 8192``, a decode replica up to ``--decoding-max-batch-size
  1024``. The KV crosses NVLink 3 (DistServe places an instance's stages in one node).
* **Lengths.** The bundled ShareGPT lengths (``traces/sharegpt/``, Llama-2 tokenizer) with
  DistServe's ShareGPT filter (``evaluation/2-benchmark-serving/0-prepare-dataset.py``: drop
  prompt + output ≥ 2048, OPT-13B's context, and pairs both under 4 tokens), shuffled with seed
  0: 14,561 pairs, prompts of mean 606 tokens. DistServe tokenised with OPT's tokenizer and
  built its prompts from a random number of a conversation's first turns; these are the
  Llama-2 counts of Sarathi-Serve's construction, the nearest bundled data (a deviation).
* **SLOs and goodput.** TTFT 250 ms and TPOT 100 ms (``_plot.py``, ``plot_fig8_upper``:
  ``0.25, 0.1, 90``), both scaled by each of :data:`SCALES` (its SLO-scale plots scale both).
  A rate meets when at least 90 % of the requests meet both (``structs.py``,
  ``get_slo_attainment``; ``_plot.py``'s ``atta_target`` 90): the joint attainment, not
  simkv's per-objective percentiles. Goodput is the highest such Poisson rate
  (:func:`simkv.capacity.search.search`, tolerance :data:`TOLERANCE`).
* **Where the first token is.** DistServe's prefill instance samples the first token and
  returns it at the prefill's end (``distserve/single_stage_engine.py``: ``StepOutput`` at
  ``ContextEnd``); its TPOT is (last token − first token) / (output − 1)
  (``structs.py``, ``RequestResult``), so the KV transfer and the wait for the decode
  replica fall in TPOT. simkv follows vLLM's P/D path (the decode replica recomputes the last
  prompt token and samples the first: transfer and decode queue fall in TTFT). The judge
  reads DistServe's attribution from the frames (``kv_handoff_s`` as the first token);
  the table also gives each split's goodput under vLLM's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from simkv.capacity.search import search
from simkv.capacity.split_plan import Budget, Split, plan_splits
from simkv.metrics.disagg import prompt_end_s
from simkv.run import load_config, simulate

ROOT = Path(__file__).resolve().parents[1]
SHAREGPT = ROOT / "traces" / "sharegpt" / "sharegpt_8k_filtered_stats_llama2_tokenizer.csv"
PROFILE = ROOT / "traces" / "measured" / "distserve" / "profiler-a100-80g.vllm.json"
TTFT_MS, TPOT_MS = 250.0, 100.0  # DistServe's OPT-13B ShareGPT SLOs (_plot.py)
ATTAINMENT = 0.9  # share of requests meeting both SLOs (_plot.py's atta_target)
CONTEXT_TOKENS = 2048  # OPT-13B's context: DistServe drops prompt + output >= this
SCALES = (1.0, 1.6, 2.5, 4.0)
GPUS = 3  # DistServe's OPT-13B instance: prefill TP 2 + decode TP 1
RATE_MIN, RATE_MAX, TOLERANCE = 0.1, 16.0, 0.02
DISTSERVE_SPLIT = "p1tp2-d1tp1"  # its OPT-13B placement, in plan_splits' names
LENGTHS = "sharegpt-distserve.csv"
KEPT = (
    "arrival_s",
    "first_scheduled_s",
    "first_token_s",
    "finish_s",
    "generated_tokens",
    "status",
    "prefill_scheduled_s",
    "kv_handoff_s",
)  # the request columns read here
VLLM_02 = {"kind": "vllm_v0", "vllm_version": "0.4", "max_num_seqs": 1024,
           "max_num_batched_tokens": 16384}  # fmt: skip


def write_lengths(folder: Path) -> Path:
    """The bundled ShareGPT lengths under DistServe's filter, shuffled (seed 0), as a CSV."""
    data = pd.read_csv(SHAREGPT)
    prompt, output = data["num_prefill_tokens"], data["num_decode_tokens"]
    keep = data[(prompt + output < CONTEXT_TOKENS) & ~((prompt < 4) & (output < 4))]
    keep = keep.sample(frac=1.0, random_state=0)
    path = folder / LENGTHS
    keep[["num_prefill_tokens", "num_decode_tokens"]].to_csv(path, index=False)
    return path


def beyond_reach(lengths: Path, requests: int, tp: int, ttft_ms: float) -> float:
    """Share of the first ``requests`` prompts of ``lengths`` whose prefill alone, on an idle
    replica at TP ``tp``, takes longer than ``ttft_ms`` by the profile (a + b·p + c·p² ms for
    p prompt tokens: DistServe's ``simdistserve/estimators/time_estimator.py``,
    ``get_prefill_time``):
    requests no layout with that prefill TP can bring within the TTFT."""
    a, b, c = json.loads(PROFILE.read_text())["facebook/opt-13b"][str(tp)]["prefill"]
    prompt = pd.read_csv(lengths, nrows=requests)["num_prefill_tokens"].to_numpy(dtype=float)
    return float((a + b * prompt + c * prompt**2 > ttft_ms).mean())


def write_config(folder: Path, requests: int) -> Path:
    """The split config (one prefill group at TP 1, one decode group), rate 1 req/s."""
    v1 = {"kind": "vllm_v1", "enable_chunked_prefill": False}
    data = {
        "name": "distserve-opt13b", "seed": 0,
        "model": {"preset": "opt-13b", "max_model_len": CONTEXT_TOKENS}, "gpu": "a100-80gb",
        "kv_cache": {"block_size": 16, "gpu_memory_utilization": 0.95, "swap_space_gib": 16},
        "cost_model": {"kind": "table", "path": str(PROFILE)}, "scheduler": VLLM_02,
        "workload": {"kind": "trace", "path": str(write_lengths(folder)), "format": "lengths",
                     "limit": requests, "arrival": {"kind": "poisson", "rate": 1.0}},
        "fleet": {"router": {"kind": "least_outstanding"},
                  "disaggregation": {"link": "nvlink3"},
                  "replicas": [
                      {"name": "prefill", "role": "prefill", "scheduler":
                       {**v1, "max_num_seqs": 128, "max_num_batched_tokens": 8192}},
                      {"name": "decode", "role": "decode", "scheduler":
                       {**v1, "max_num_seqs": 1024, "max_num_batched_tokens": 65536}}]},
        "slo": {"ttft_ms": TTFT_MS, "tpot_ms": TPOT_MS, "percentile": 90},
    }  # fmt: skip
    path = folder / "distserve.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def colocated(count: int) -> Split:
    """``count`` vLLM 0.2 replicas at TP 1 (DistServe's baseline is ``count`` 1)."""
    group = {"name": "vllm", "role": "mixed", "count": count, "scheduler": VLLM_02}
    sets = ("fleet.disaggregation=null", f"fleet.replicas=[{json.dumps(group)}]")
    return Split(f"vllm-{count}", 0, count, count, sets)


def layouts(config: Path) -> list[Split]:
    """The splits of :data:`GPUS` GPUs at prefill TP 1 or 2 and decode TP 1, then the
    colocated fleets of 1 and :data:`GPUS` vLLM replicas."""
    budget = Budget(gpus=GPUS, tp_prefill=(1, 2), tp_decode=(1,))
    splits = [s for s in plan_splits(config, [], budget) if s.prefill > 0]
    return [*splits, colocated(1), colocated(GPUS)]


def attainment(requests: pd.DataFrame, ttft_ms: float, tpot_ms: float,
               at_prefill: bool) -> dict[str, float]:  # fmt: skip
    """Shares of ``requests`` meeting TTFT, TPOT and both (a request not finished meets
    neither). ``at_prefill``: the first token at the prefill's end (DistServe), else where
    simkv's frame puts it (vLLM's P/D: at the decode replica)."""
    first = (prompt_end_s(requests) if at_prefill else requests["first_token_s"]).to_numpy(
        dtype=float
    )
    done = (requests["status"] == "finished").to_numpy()
    ttft = (first - requests["arrival_s"].to_numpy(dtype=float)) * 1e3
    n = requests["generated_tokens"].to_numpy(dtype=float)
    span_ms = (requests["finish_s"].to_numpy(dtype=float) - first) * 1e3
    tpot = np.where(n > 1, span_ms / np.maximum(n - 1, 1), 0.0)
    ok_ttft, ok_tpot = done & (ttft <= ttft_ms), done & (tpot <= tpot_ms)
    return {"ttft": float(ok_ttft.mean()), "tpot": float(ok_tpot.mean()),
            "both": float((ok_ttft & ok_tpot).mean())}  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    """What the judge and the diagnosis read of a run: its requests frame, and its steps'
    busy seconds in all and in steps that prefill."""

    requests: pd.DataFrame
    busy_s: float
    prefill_busy_s: float


@dataclass
class Runs:
    """Simulations of one config, each (layout, rate) run once and kept (the frames the
    judge and the diagnosis read)."""

    config: Path
    out: Path

    def __post_init__(self) -> None:
        self.cache: dict[tuple[str, float], Outcome] = {}

    def run(self, split: Split, rate: float) -> Outcome:
        """The outcome of ``split`` at ``rate`` requests/s."""
        key = (split.name, rate)
        if key not in self.cache:
            cfg = load_config(self.config, [*split.sets, f"workload.arrival.rate={rate!r}"])
            out = simulate(cfg, self.out)
            steps = out.steps
            prefill = float(steps.loc[steps["prefill_tokens"] > 0, "duration_s"].sum())
            kept = out.requests[[c for c in out.requests.columns if c in KEPT]]
            self.cache[key] = Outcome(kept, float(steps["duration_s"].sum()), prefill)
        return self.cache[key]

    def goodput(self, split: Split, scale: float, at_prefill: bool) -> float | None:
        """The highest rate (requests/s) at which ≥ :data:`ATTAINMENT` of the requests meet
        both SLOs scaled by ``scale`` (None: not even :data:`RATE_MIN`)."""

        def judge(rates: list[float]) -> dict[float, bool | None]:
            return {r: attainment(self.run(split, r).requests, TTFT_MS * scale,
                                  TPOT_MS * scale, at_prefill)["both"] >= ATTAINMENT
                    for r in rates}  # fmt: skip

        return search(judge, RATE_MIN, RATE_MAX, tolerance=TOLERANCE, per_round=3).answer


def diagnose(run: Outcome, scale: float) -> list[str]:
    """What a run's requests met and where their time went: TTFT, TPOT and joint attainment
    (DistServe's attribution), mean wait before the first prefill step, mean TTFT and TPOT
    (ms), and the share of busy GPU time in steps that prefill (decodes wait through them on
    a vLLM 0.2 replica)."""
    req = run.requests
    met = attainment(req, TTFT_MS * scale, TPOT_MS * scale, at_prefill=True)
    scheduled = req.get("prefill_scheduled_s", req["first_scheduled_s"])
    scheduled = scheduled.fillna(req["first_scheduled_s"])
    first = prompt_end_s(req)
    wait = ((scheduled - req["arrival_s"]) * 1e3).mean()
    ttft = ((first - req["arrival_s"]) * 1e3).mean()
    n = req["generated_tokens"].clip(lower=2) - 1
    tpot = ((req["finish_s"] - first) * 1e3 / n).mean()
    share = run.prefill_busy_s / max(run.busy_s, 1e-12)
    return [f"{met['ttft']:.1%}", f"{met['tpot']:.1%}", f"{met['both']:.1%}", f"{wait:.0f}",
            f"{ttft:.0f}", f"{tpot:.0f}", f"{share:.0%}"]  # fmt: skip


ROOFLINE = 'cost_model={"kind": "roofline", "host_era": "vllm-0.2-0.4"}'
"""The check's step model: simkv's roofline with vLLM 0.2's host costs (simkv.config.host_eras,
fitted on the same DistServe profile) and its default GPU efficiencies (vLLM 0.19's kernels)."""


def roofline_check(runs: Runs, splits: list[Split], scale: float) -> list[list[str]]:
    """Each layout's goodput per GPU at ``scale`` under :data:`ROOFLINE` instead of the
    profile: how much the verdict owes to the 2023 kernels' prefill times."""
    out = []
    for split in splits:
        variant = replace(split, name=f"{split.name}+roofline", sets=(*split.sets, ROOFLINE))
        rate = runs.goodput(variant, scale, True)
        out.append([split.name, "—" if rate is None else f"{rate / split.gpus:.2f}"])
    return out
