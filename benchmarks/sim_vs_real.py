"""Sim vs real: simkv's error against real GPU measurements, with defaults, calibrated on the
same data, and held out (calibrated on one dataset, predicting another).

    .venv/bin/python benchmarks/sim_vs_real.py                # prints (about 2 minutes)
    .venv/bin/python benchmarks/sim_vs_real.py --write-docs   # + its block of docs/fidelity.md

Request level: the two vLLM 0.19 runs in traces/measured/llmservingsim-vllm0.19, replayed by
configs/measured/*.yaml; the error is the mean absolute Diff% over TTFT, TPOT and E2E × mean,
p50, p90, p99 (simkv.metrics.validation). Step level: the DistServe profile (OPT-13B/66B on
A100-80GB) and the Splitwise table (Llama-2-70B on A100-80GB, TP 2/4/8); the error is the mean
absolute relative error of the step times. The roofline's defaults were themselves fitted to
the two request-level runs (simkv/config/cost.py), so their error there is in sample: the
held-out columns are the test. Paper Figure 13: the mean batch of every configs/paper/ scheme
at the figure's rates (ShareGPT-like 2 req/s, Alpaca-like 30 req/s), with the defaults and with
the profile fitted to the DistServe OPT-13B data (the vLLM of the paper's era).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from doc_blocks import SIM_VS_REAL, write_block

from simkv.calibrate.api import RUN_KNOBS, STEP_KNOBS, calibrate
from simkv.calibrate.fit import step_errors
from simkv.calibrate.runs import run_objective
from simkv.calibrate.steps import read_step_samples
from simkv.config.cost import RooflineCostConfig
from simkv.config.sim import load_config
from simkv.measured import read_measured_run
from simkv.runner import simulate

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "traces" / "measured"
RUNS = {
    "RTX 4090": (MEASURED / "llmservingsim-vllm0.19" / "RTX4090_Llama-3.1-8B",
                 ROOT / "configs" / "measured" / "rtx4090_llama31_8b.yaml"),
    "RTX PRO 6000": (MEASURED / "llmservingsim-vllm0.19" / "RTXPRO6000_Llama-3.1-8B",
                     ROOT / "configs" / "measured" / "rtxpro6000_llama31_8b.yaml"),
}  # fmt: skip
DISTSERVE = MEASURED / "distserve" / "profiler-a100-80g.vllm.json"
SPLITWISE = MEASURED / "splitwise" / "perf_model_a100.csv"
TP_KNOBS = ("allreduce_latency_us", "nvlink_hop_latency_us", "interconnect_efficiency")
FIG13_RATES = {"sharegpt": 2.0, "alpaca": 30.0}  # the rates of the paper's Figure 13, req/s
PAPER_FIG13 = {"sharegpt_vllm_v0": 30.42, "sharegpt_orca_max": 7.00}
"""The paper's values this benchmark checks (Figure 13, mean batched requests); the other
schemes' bars are shown without a paper value."""


def request_level() -> tuple[list[list[str]], dict[str, RooflineCostConfig]]:
    fitted: dict[str, RooflineCostConfig] = {}
    objectives = {}
    for name, (run_dir, config) in RUNS.items():
        run = read_measured_run(run_dir)
        objectives[name] = run_objective(load_config(config), config.parent, run)
        fitted[name] = calibrate([run_dir], configs=[config], knobs=RUN_KNOBS).result.config
    rows = []
    for name, objective in objectives.items():
        other = next(n for n in RUNS if n != name)
        rows.append([name, _pct(objective(RooflineCostConfig())), _pct(objective(fitted[name])),
                     f"{_pct(objective(fitted[other]))} (fitted on {other})"])  # fmt: skip
    return rows, fitted


def _step_row(label: str, train: list, test: list, knobs: tuple[str, ...]) -> list[str]:
    from simkv.calibrate.fit import fit_steps

    result = fit_steps(RooflineCostConfig(), train, knobs)
    mae = lambda cfg, s: abs(step_errors(cfg, s)).mean()  # noqa: E731
    held = _pct(mae(result.config, test)) if test else "—"
    return [label, _pct(mae(RooflineCostConfig(), train + test)), _pct(result.error), held]


def step_level() -> tuple[list[list[str]], RooflineCostConfig]:
    opt13 = read_step_samples(DISTSERVE, gpu="a100-80gb", model="opt-13b")
    opt66 = read_step_samples(DISTSERVE, gpu="a100-80gb", model="opt-66b")
    llama = read_step_samples(SPLITWISE, model="llama-2-70b")
    knobs = (*STEP_KNOBS, *TP_KNOBS)
    rows = [
        _step_row("DistServe OPT-13B → OPT-66B", opt13, opt66, knobs),
        _step_row("Splitwise Llama-2-70B TP 2+4 → TP 8",
                  [s for s in llama if s.tensor_parallel < 8],
                  [s for s in llama if s.tensor_parallel == 8], knobs),
    ]  # fmt: skip
    from simkv.calibrate.fit import fit_steps

    paper_era = fit_steps(RooflineCostConfig(), opt13, knobs).config
    return rows, paper_era


def figure13(paper_era: RooflineCostConfig) -> list[list[str]]:
    rows = []
    for workload, rate in FIG13_RATES.items():
        for scheme in ("vllm_v0", "orca_max", "orca_pow2", "orca_oracle"):
            name = f"{workload}_{scheme}"
            path = ROOT / "configs" / "paper" / f"{name}.yaml"
            cfg = load_config(path, [f"workload.arrival.rate={rate}"])
            batches = []
            for cost in (cfg.cost_model, paper_era):
                run = cfg.model_copy(update={"cost_model": cost})
                batches.append(
                    f"{simulate(run, path.parent).frames.steps['batch_size'].mean():.2f}"
                )
            paper = PAPER_FIG13.get(name)
            rows.append([f"{name} at {rate:g} req/s", "—" if paper is None else f"{paper:.2f}",
                         *batches])  # fmt: skip
    return rows


WHY = """\
### Why the errors above 10 %

- **Defaults are in sample on the request-level runs.** The roofline's overheads and KV-read
  efficiency were fitted to these two runs together (GEMM and weight-read efficiencies held at
  0.8 and 0.9), so the *defaults* column is not a prediction; the *held out* column is. The
  RTX 4090 run is KV-bound (2,588 blocks, TTFT is a minute of queueing), so its error follows
  admission and preemption as much as step time; vLLM 0.19 admits a request only when its
  whole prompt fits (`scheduler.reserve_full_prompt`, read from the run's `meta.json`).
- **Held out across GPUs.** The two runs pin the host overheads differently. The RTX 4090
  run keeps ~35 requests running (KV-bound), so its per-sequence overhead is small beside its
  GPU terms and trades against them: fitted there (overheads only: 0.78 ms a step and 0 ms a
  sequence), the overheads come out too small for the RTX PRO 6000, which runs 128 sequences
  where 0.045 ms a sequence is 6 ms a step. Fitted on the RTX PRO 6000, the RTX 4090 is
  predicted within about 10 %. The RTX 4090 also asks for a GEMM efficiency above 1 against
  its 165.2 TFLOPS FP32-accumulate figure: its prefills run faster than that spec allows.
- **Step level, DistServe.** The profile is a fit itself (two decode regimes with a jump at 95
  sequences), which no single roofline reproduces to better than ~8 %. Held out on OPT-66B, the
  error sits in decode at TP 2 (OPT-66B's 66 GB of weights per 80 GB GPU; its profile charges
  4× the per-token KV cost of every other setting) and TP 8; prefill is predicted within
  5-13 %. The paper-era fit has a ~17 ms fixed step cost and a weight-read efficiency above 1:
  the 2023-24 vLLM's decode step barely shrinks with TP, i.e. it was host-bound.
- **Step level, Splitwise.** Batched prompts take about as long at TP 4 as at TP 2 (16 × 512
  tokens: 3.2 s vs 2.9 s) but a single 8,192-token prompt does not (3.0 s vs 2.3 s); a fit to
  TP 2 and 4 therefore cannot extrapolate prefill to TP 8 (predicted ~30 % slow).
- **Figure 13.** By Little's law the paper's 30.42 batched requests at 2 req/s and 338 output
  tokens mean about 45 ms per generated token; the DistServe profile of a later vLLM on the
  same GPU class gives ~31 ms at that batch, hence ~23. Orca (Max) is bound by memory, not
  time, and stays at 7.
"""


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true",
                        help="write the 'sim vs real' block of docs/fidelity.md")  # fmt: skip
    args = parser.parse_args()
    started = time.perf_counter()
    req_rows, _ = request_level()
    step_rows, paper_era = step_level()
    fig_rows = figure13(paper_era)
    text = "\n\n".join([
        "## Sim vs real: step times against real GPUs\n\n"
        "Generated by `benchmarks/sim_vs_real.py --write-docs` "
        f"({time.perf_counter() - started:.0f} s). Errors: request level, mean abs. Diff% over "
        "TTFT/TPOT/E2E × mean/p50/p90/p99; step level, mean abs. relative step-time error.",
        "### Request level: vLLM 0.19 on two GPUs (Llama-3.1-8B, 300 ShareGPT requests)",
        table(["run", "defaults", "calibrated on the run", "held out"], req_rows),
        "### Step level",
        table(["data (fit → held out)", "defaults", "calibrated", "held out"], step_rows),
        "### PagedAttention paper, Figure 13 (mean batched requests at the paper's rates)",
        table(["config", "paper", "simkv defaults", "paper-era profile (DistServe OPT-13B fit)"],
              fig_rows),
        WHY,
    ]) + "\n"  # fmt: skip
    print(text)
    if args.write_docs:
        write_block(ROOT / "docs" / "fidelity.md", SIM_VS_REAL, text)


if __name__ == "__main__":
    main()
