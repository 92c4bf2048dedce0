"""Sim vs real: simkv's error against real GPU measurements, with defaults, calibrated on the
same data, and held out (calibrated on one dataset, predicting another).

    .venv/bin/python benchmarks/sim_vs_real.py                # prints (about 5 minutes)
    .venv/bin/python benchmarks/sim_vs_real.py --write-docs   # + its block of docs/fidelity.md

It ends with benchmarks/cross_gpu.py (A100 steps fitted, H100 steps predicted),
benchmarks/cpu_live.py (the live rate sweeps of a real vLLM on this project's CPUs) and
benchmarks/saturation.py (their knees), whose blocks of docs/fidelity.md ``--write-docs``
rewrites too: one command regenerates all four.

Request level: the three vLLM 0.19 runs in traces/measured/llmservingsim-vllm0.19 (Llama-3.1-8B
on an RTX 4090 and on an RTX PRO 6000, Qwen3-32B at TP 2 on two RTX PRO 6000), replayed by
configs/measured/*.yaml; the error is the mean absolute Diff% over TTFT, TPOT and E2E × mean,
p50, p90, p99 (simkv.metrics.validation). Step level: the DistServe profile (OPT-13B/66B on
A100-80GB) and the Splitwise table (Llama-2-70B on A100-80GB, TP 2/4/8); the error is the mean
absolute relative error of the step times. Paper Figure 13: the mean batch of every
configs/paper/ scheme at the figure's rates (ShareGPT-like 2 req/s, Alpaca-like 30 req/s), with
the defaults and with the profile fitted to the DistServe OPT-13B data (the vLLM of the paper's
era).

The held-out protocol is leak-free: no number in a held-out column comes from a fit that saw
the predicted data, defaults included.

* The roofline's two default host overheads were fitted to the two Llama-3.1-8B runs together
  (simkv/config/cost.py), so the *defaults* column of those runs is in sample; of the
  Qwen3-32B run it is a prediction (:data:`IN_DEFAULTS`). Every
  request-level fit here starts instead from :data:`PRIOR` (the defaults with those two knobs
  replaced by round values chosen without either run) and its weak prior is centred there
  (simkv.calibrate.fit.PRIOR_SIGMA); no knob of a held-out prediction keeps a value fitted on
  the predicted run. The GPU terms use each preset's spec bandwidth and its measured sustained
  GEMM rate (``sustained_tflops``, a public torch matmul measurement, not these runs).
* Across GPUs and models only the engine's host side transfers: the held-out fit changes
  :data:`HOST_KNOBS` (the fixed and per-sequence overheads) on the training run
  (:data:`HELD_OUT`); the GPU terms of the predicted run are its spec sheet at :data:`PRIOR`'s
  efficiencies. (A fit of all four
  run knobs, the *calibrated* column, moves the GEMM efficiency to what one board reaches
  against its own spec, which does not carry to another board.)
* Step level: the fits start from the defaults, whose fitted values come from the vLLM 0.19
  runs, not from the DistServe or Splitwise data; the weight-read efficiency keeps its
  documented 0.9 (simkv.calibrate.api.STEP_KNOBS says why).
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from functools import cache, partial
from pathlib import Path

import numpy as np
import yaml
from cpu_live import write as cpu_live
from cross_gpu import write as cross_gpu
from doc_blocks import SIM_VS_REAL, write_block
from doc_blocks import markdown_table as table
from saturation import write as saturation
from scipy.optimize import linprog

from simkv.calibrate.api import RUN_KNOBS, step_knobs
from simkv.calibrate.fit import FitResult, fit_run, fit_steps, step_error, step_errors
from simkv.calibrate.kernels import (
    ATTENTION_KNOBS,
    LINEAR_KNOBS,
    AttentionGrid,
    LinearProfile,
    attention_us,
    attention_works,
    decoder_layer,
    fit_attention,
    fit_linear,
    linear_us,
)
from simkv.calibrate.runs import run_objective
from simkv.calibrate.steps import StepSample, read_step_samples
from simkv.config.cost import RooflineCostConfig
from simkv.config.hardware import GpuSpec, ModelSpec, load_gpu_preset, load_model_preset
from simkv.config.profile import read_profile
from simkv.engine.cost_model import RooflineCostModel
from simkv.measured import read_measured_run
from simkv.measured.profiles import attention_kernel_us, linear_kernel_us, moe_kernel_us
from simkv.presets import find_preset
from simkv.run import load_config, simulate

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "traces" / "measured"
LLMSERVINGSIM = MEASURED / "llmservingsim-vllm0.19"
CONFIGS = ROOT / "configs" / "measured"
RUNS = {
    "RTX 4090, Llama-3.1-8B": (LLMSERVINGSIM / "RTX4090_Llama-3.1-8B",
                               CONFIGS / "rtx4090_llama31_8b.yaml"),
    "RTX PRO 6000, Llama-3.1-8B": (LLMSERVINGSIM / "RTXPRO6000_Llama-3.1-8B",
                                   CONFIGS / "rtxpro6000_llama31_8b.yaml"),
    "2 × RTX PRO 6000, Qwen3-32B TP 2": (LLMSERVINGSIM / "RTXPRO6000_Qwen3-32B",
                                         CONFIGS / "rtxpro6000_qwen3_32b.yaml"),
}  # fmt: skip
IN_DEFAULTS = ("RTX 4090, Llama-3.1-8B", "RTX PRO 6000, Llama-3.1-8B")
"""The runs the roofline's default host overheads were fitted to (simkv/config/cost.py)."""
HELD_OUT = {
    "RTX 4090, Llama-3.1-8B": "RTX PRO 6000, Llama-3.1-8B",
    "RTX PRO 6000, Llama-3.1-8B": "RTX 4090, Llama-3.1-8B",
    "2 × RTX PRO 6000, Qwen3-32B TP 2": "RTX PRO 6000, Llama-3.1-8B",
}
"""Predicted run → the run its host overheads are fitted on: one GPU → the other for the Llama
runs; for Qwen3-32B, the Llama run of the same host and engine (a smaller model at TP 1 → a
larger one at TP 2 over PCIe, the direction of the step-level pairings)."""
PROFILES = MEASURED / "llmservingsim-profiles"
DISTSERVE = MEASURED / "distserve" / "profiler-a100-80g.vllm.json"
SPLITWISE = MEASURED / "splitwise" / "perf_model_a100.csv"
FIG13_RATES = {"sharegpt": 2.0, "alpaca": 30.0}  # the rates of the paper's Figure 13, req/s
PAPER_FIG13 = {"sharegpt_vllm_v0": 30.42, "sharegpt_orca_max": 7.00}
PRIOR = read_profile(ROOT / "configs" / "measured" / "profiles" / "host_prior.yaml")
"""Start and prior centre of every request-level fit here and of the defaults' own fit: the
defaults, except the two knobs fitted to the two Llama runs, set to round values chosen without
any run: 1 ms a step and 0.02 ms a sequence (the order of a CUDA-graph decode step's
host work)."""
HOST_KNOBS = ("step_overhead_ms", "seq_overhead_ms")
"""What a held-out request-level fit changes on the training run: the engine's host side."""
"""The paper's values this benchmark checks (Figure 13, mean batched requests); the other
schemes' bars are shown without a paper value."""


def request_level() -> list[list[str]]:
    objectives = {}
    calibrated: dict[str, RooflineCostConfig] = {}
    host: dict[str, RooflineCostConfig] = {}
    for name, (run_dir, config) in RUNS.items():
        objective = run_objective(load_config(config), config.parent, read_measured_run(run_dir))
        objectives[name] = objective
        calibrated[name] = fit_run(PRIOR, objective, RUN_KNOBS).config
        if name in HELD_OUT.values():
            host[name] = fit_run(PRIOR, objective, HOST_KNOBS).config
    rows = []
    for name, objective in objectives.items():
        sample = "in sample" if name in IN_DEFAULTS else "held out"
        trained = HELD_OUT[name]
        rows.append([name, f"{_pct(objective(RooflineCostConfig()))} ({sample})",
                     _pct(objective(calibrated[name])),
                     f"{_pct(objective(host[trained]))} (fitted on {trained})"])  # fmt: skip
    return rows


StepRow = tuple[list[str], list[list[str]]]


@cache
def _least_squares(name: str) -> FitResult:
    """The least-squares step fit (`simkv calibrate`'s) of the dataset ``name`` of
    :func:`_step_sets`, from the defaults; each dataset is fitted once per run."""
    samples = _step_sets()[name]
    return fit_steps(RooflineCostConfig(), samples, step_knobs(samples))


def _step_row(label: str, held_label: str, train: str, test: str) -> StepRow:
    """The table row of a pairing (dataset names of :func:`_step_sets`) and the held-out error
    per tp degree and phase."""
    result = _least_squares(train)
    test_samples = _step_sets()[test]
    errors = step_errors(result.config, test_samples)
    groups: dict[tuple[int, str], list[float]] = {}
    for sample, error in zip(test_samples, errors, strict=True):
        groups.setdefault((sample.tensor_parallel, sample.phase), []).append(float(error))
    by_group = [[held_label, f"{tp} {phase}", str(len(e)),
                 _pct(float(np.mean(np.abs(e)))), f"{100 * float(np.mean(e)):+.1f} %"]
                for (tp, phase), e in sorted(groups.items())]  # fmt: skip
    every = _step_sets()[train] + test_samples
    row = [label, _pct(step_error(RooflineCostConfig(), every)), _pct(result.error),
           _pct(step_error(result.config, test_samples))]  # fmt: skip
    return row, by_group


@cache
def _step_sets() -> dict[str, list[StepSample]]:
    """The four step datasets of the two held-out pairings, in the order of the pairings."""
    opt13 = read_step_samples(DISTSERVE, gpu="a100-80gb", model="opt-13b")
    opt66 = read_step_samples(DISTSERVE, gpu="a100-80gb", model="opt-66b")
    llama = read_step_samples(SPLITWISE, model="llama-2-70b")
    return {
        "DistServe OPT-13B": opt13,
        "DistServe OPT-66B": opt66,
        "Splitwise Llama-2-70B TP 2+4": [s for s in llama if s.tensor_parallel < 8],
        "Splitwise Llama-2-70B TP 8": [s for s in llama if s.tensor_parallel == 8],
    }


def step_level() -> tuple[list[list[str]], list[list[str]], RooflineCostConfig]:
    opt13, opt66, tp24, tp8 = _step_sets()  # the datasets' names
    pairs = [
        ("DistServe OPT-13B → OPT-66B", "DistServe OPT-66B", opt13, opt66),
        ("Splitwise Llama-2-70B TP 2+4 → TP 8", "Splitwise Llama-2-70B", tp24, tp8),
    ]  # fmt: skip
    rows, groups = [], []
    for label, held_label, train, test in pairs:
        row, by_group = _step_row(label, held_label, train, test)
        rows.append(row)
        groups += by_group
    return rows, groups, _least_squares(opt13).config  # the paper-era profile


LEAST_ABS_ROUNDS = 3
"""Nelder–Mead restarts of the least-abs. roofline fit (each from the last one's result, at
most 1,500 evaluations each): the third changes the error by under 0.05 points."""


def _linear_features(sample: StepSample) -> list[float]:
    """The free linear model's terms of one step: for a prefill, 1, tokens, prompts, attention
    pairs and tokens²; for a decode, 1, sequences, KV tokens read and sequences²."""
    w = sample.work
    if sample.phase == "prefill":
        return [1, w.prefill_tokens, w.num_seqs, w.attention_pairs, w.prefill_tokens**2]
    return [1, w.num_seqs, w.kv_read_tokens, w.num_seqs**2]


def _least_abs_linear(samples: list[StepSample]) -> tuple[np.ndarray, int]:
    """Each step's abs. relative error under the non-negative coefficients of
    :func:`_linear_features` that minimise the mean abs. relative error (exactly: a linear
    program), and the number of coefficients."""
    times = np.array([s.time_ms for s in samples])
    terms = np.array([_linear_features(s) for s in samples], dtype=float) / times[:, None]
    terms /= np.where(terms.max(axis=0) > 0, terms.max(axis=0), 1.0)
    n, k = terms.shape
    # minimise Σ (over + under) subject to terms · c − over + under = 1, everything ≥ 0
    cost = np.concatenate([np.zeros(k), np.ones(2 * n)])
    equality = np.hstack([terms, -np.eye(n), np.eye(n)])
    result = linprog(cost, A_eq=equality, b_eq=np.ones(n), bounds=(0, None), method="highs")
    return np.abs(terms @ result.x[:k] - 1.0), k


def reach() -> list[list[str]]:
    """How low a fit of each step dataset can go: the roofline by least squares on log ratios
    (what `simkv calibrate` fits), the roofline by least mean abs. error (Nelder–Mead from
    there, no prior), and a free linear model with its own coefficients for every tp degree and
    phase (:func:`_least_abs_linear`), each fitted on the data it is scored on."""
    rows = []
    for label, samples in _step_sets().items():
        least_squares = _least_squares(label)
        objective = partial(step_error, samples=samples)
        config = least_squares.config
        for _ in range(LEAST_ABS_ROUNDS):
            config = fit_run(config, objective, least_squares.knobs, max_evaluations=1500,
                             prior=False).config  # fmt: skip
        groups: dict[tuple[int, str], list[StepSample]] = {}
        for s in samples:
            groups.setdefault((s.tensor_parallel, s.phase), []).append(s)
        fits = [_least_abs_linear(group) for group in groups.values()]
        free = float(np.mean(np.concatenate([errors for errors, _ in fits])))
        rows.append([label, str(len(samples)), _pct(least_squares.error),
                     _pct(step_error(config, samples)), str(len(least_squares.knobs)),
                     _pct(free), str(sum(k for _, k in fits))])  # fmt: skip
    return rows


def _kernel_row(
    label: str, tokens: np.ndarray, errors: np.ndarray, max_errors: np.ndarray
) -> list[str]:
    """Mean abs. and signed error over a profile's token counts, the mean abs. error with the
    classic roofline's max, and the error at 1 (or the fewest), 256 and 2,048 tokens."""
    at = {n: errors[tokens == n] for n in (tokens.min(), 256, 2048)}
    shown = [f"{100 * float(e[0]):+.1f} %" if len(e) else "—" for e in at.values()]
    return [label, str(len(errors)), _pct(float(np.abs(errors).mean())),
            f"{100 * float(errors.mean()):+.1f} %", _pct(float(np.abs(max_errors).mean())),
            *shown]  # fmt: skip


def _profile_presets(folder: Path) -> tuple[GpuSpec, ModelSpec, str]:
    """The GPU and model presets of a profile's ``<dtype>`` folder, found from its
    ``meta.yaml`` (the device name as the driver reported it), and a label."""
    meta = yaml.safe_load((folder / "meta.yaml").read_text(encoding="utf-8"))
    gpu, model = find_preset("gpus", meta["gpu"]), find_preset("models", meta["model"])
    if gpu is None or model is None:
        raise SystemExit(f"{folder}: no preset for {meta['gpu']!r} or {meta['model']!r}")
    label = f"{gpu}, {meta['model'].split('/')[-1]}"
    return load_gpu_preset(gpu), load_model_preset(model), label


def _linear_profiles() -> dict[str, LinearProfile]:
    """The bundled dense models' ``dense.csv`` profiles by label (a mixture of experts' lacks
    its experts: checked through ``moe.csv`` instead)."""
    profiles = {}
    for dense in sorted(PROFILES.glob("*/*/*/*/tp*/dense.csv")):
        gpu, model, label = _profile_presets(dense.parents[1])
        if not model.is_moe:
            tp = int(dense.parent.name.removeprefix("tp"))
            profiles[f"{label}, TP {tp}: linear layers"] = LinearProfile(dense, gpu, model, tp)
    return profiles


def linear_fit() -> str:
    """The linear knobs :func:`fit_linear` finds on the bundled profiles, from the defaults:
    where the defaults of ``gemm_efficiency`` and ``linear_overlap_exponent`` come from
    (rounded)."""
    fitted = fit_linear(list(_linear_profiles().values()), RooflineCostConfig())
    return ", ".join(f"`{knob}` {getattr(fitted, knob):.4g}" for knob in LINEAR_KNOBS)


MAX_ROOFLINE = RooflineCostConfig(linear_overlap_exponent=64.0)
"""The defaults with the linear layers priced at the larger of their FLOP and weight-stream
times (the classic roofline), for comparison."""


def kernel_level() -> list[list[str]]:
    """simkv's linear term (:meth:`RooflineCostModel.linear_s`) against the measured kernels
    of one decoder layer (:mod:`simkv.measured.profiles`), with the defaults and with
    :data:`MAX_ROOFLINE`; error = simkv / measured − 1, + = simkv slow."""
    rows = []
    for label, profile in _linear_profiles().items():
        measured = linear_kernel_us(profile.path)
        tokens, us = np.array(list(measured)), np.array(list(measured.values()))
        errors = [linear_us(cfg, profile, list(measured)) / us - 1
                  for cfg in (RooflineCostConfig(), MAX_ROOFLINE)]  # fmt: skip
        rows.append(_kernel_row(label, tokens, *errors))
    for moe in sorted(PROFILES.glob("*/*/*/*/tp1/moe.csv")):
        gpu, model, label = _profile_presets(moe.parents[1])
        layer = decoder_layer(model, experts_only=True)
        costs = [RooflineCostModel(cfg, layer, gpu, tensor_parallel=1, block_size=16)
                 for cfg in (RooflineCostConfig(), MAX_ROOFLINE)]  # fmt: skip
        points = moe_kernel_us(moe)
        for experts in np.unique(points[:, 1]):
            part = points[points[:, 1] == experts]
            errors = [np.array([cost.linear_s(int(n), 0, a) * 1e6 / us - 1 for n, a, us in part])
                      for cost in costs]  # fmt: skip
            rows.append(_kernel_row(f"{label}: experts, {experts:.0f} activated", part[:, 0],
                                    *errors))  # fmt: skip
    return rows


def _abs(errors: np.ndarray) -> str:
    return _pct(float(np.abs(errors).mean()))


def _signed(errors: np.ndarray) -> str:
    return f"{100 * float(errors.mean()):+.1f} %" if len(errors) else "—"


def _attention_grids() -> dict[str, AttentionGrid]:
    """The bundled ``attention.csv`` grids by label."""
    grids = {}
    for path in sorted(PROFILES.glob("*/*/*/*/tp1/attention.csv")):
        gpu, model, label = _profile_presets(path.parents[1])
        grids[f"{label}, TP 1"] = AttentionGrid(path, gpu, model)
    return grids


def attention_fit() -> str:
    """The attention knobs :func:`fit_attention` finds on the bundled grids, from the
    defaults: where the defaults of ``attention_floor_us``, ``kv_read_efficiency``,
    ``attention_efficiency`` and ``mixed_gqa_reread`` come from (rounded)."""
    fitted = fit_attention(list(_attention_grids().values()), RooflineCostConfig())
    return ", ".join(f"`{knob}` {getattr(fitted, knob):.4g}"
                     for stage in ATTENTION_KNOBS for knob in stage)  # fmt: skip


def attention_level() -> list[list[str]]:
    """simkv's attention term (:meth:`RooflineCostModel.attention_s`, the defaults) against the
    measured attention layer (``attention.csv``); error = simkv / measured − 1. Mean abs. error
    over the whole grid and over its decode-only, prefill-only and mixed shapes; bias of its
    KV-read-bound decodes (≥ 64 sequences of ≥ 2,048 cached tokens, no prefill) and of its large
    prefills (chunks of ≥ 1,024 tokens, no decode)."""
    cfg, rows = RooflineCostConfig(), []
    for label, grid in _attention_grids().items():
        shapes = attention_kernel_us(grid.path)
        errors = attention_us(cfg, grid, attention_works(shapes)) / shapes[:, 4] - 1
        chunk, n_dec, kv_d = shapes[:, 0], shapes[:, 2], shapes[:, 3]
        decode, prefill = chunk == 0, n_dec == 0
        kv_bound = decode & (n_dec >= 64) & (kv_d >= 2048)
        large = prefill & (chunk >= 1024)
        rows.append([label, f"{len(errors):,}", _abs(errors), _signed(errors),
                     _abs(errors[decode]), _abs(errors[prefill]), _abs(errors[~decode & ~prefill]),
                     f"{_signed(errors[kv_bound])} ({kv_bound.sum()})",
                     f"{_signed(errors[large])} ({large.sum()})"])  # fmt: skip
    return rows


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
### Why the errors above 10 % (and the in-sample step fits above 2 %)

- **Defaults are in sample on the Llama-3.1-8B runs.** The roofline's two host overheads
  were fitted to these two runs together (the attention knobs first, to the kernel profiles
  below; every other knob at its documented value), so their *defaults* column is not a
  prediction; the Qwen3-32B run was used by neither fit, and its 4.0 % is.
  The RTX 4090 run is KV-bound (2,588 blocks, TTFT is a minute of queueing), so its error
  follows admission and preemption as much as step time; vLLM 0.19 admits a request only when
  its whole prompt fits (`scheduler.reserve_full_prompt`, from the run's `meta.json`). The
  held-out fits start from round priors instead (the script's `PRIOR`) and change only the
  host overheads, so nothing in that column was fitted on the run it predicts.
- **The GPUs' sustained rates, and which RTX PRO 6000.** The GEMM and attention terms are
  priced against each preset's measured sustained BF16 rate (`sustained_tflops`: one public
  torch matmul harness at 8192³), not its spec peak. The RTX PRO 6000 runs' `meta.json` does not
  name the board; the layer profiles their publisher took a day earlier on the same hardware
  with the same vLLM record an RTX PRO 6000 Blackwell *Server Edition*, whose memory runs at
  1,597 GB/s, not the Workstation Edition's 1,792, and which sustains 409 TFLOPS, so the replays
  use the `rtx-pro-6000-server` preset. Those profiles confirm both figures: one Llama-3.1-8B
  layer's linear weights stream at 1,423-1,454 GB/s at 1-8 tokens (0.9 of 1,597, the
  weight-read efficiency simkv assumes) and its linear layers compute 396 TFLOPS at 2,048 tokens.
  Replayed on the Workstation Edition's figures, the RTX PRO 6000 run predicted from the RTX
  4090 misses by 3.9 % (2.8 % on the Server Edition's), and by 18.8 % at the Workstation's spec
  peak.
- **The host split.** Fitted on their own runs, the two hosts spend 0.42 ms a step and 0.0099
  ms a sequence (RTX 4090) and 0.78 ms and 0.0038 ms (RTX PRO 6000): two machines whose CPUs
  the runs do not record, and runs that never batch more than about 35 sequences, so the two
  knobs trade against each other; either host's pair predicts the other run within 2.8 %.
  Before the attention floor and the mixed-step re-reads were priced (the kernel level below),
  the per-sequence host time had to absorb them and came out 0.014 and 0.022 ms, and each GPU
  predicted from the other missed by 4.2 % and 8.1 %.
- **Qwen3-32B at TP 2 (PCIe).** Predicted from the Llama run of the same host, simkv is within
  4.0 %; its own host fit needs 0.63 ms a step and 0.035 ms a sequence, 9× the Llama run's
  0.0038 ms a sequence. One reading is the engine: at TP > 1 vLLM
  0.19 runs each GPU's worker in its own process and broadcasts every step's scheduler output
  to them (`vllm/v1/executor/multiproc_executor.py`), work that grows with the batch and that a
  TP-1 engine does not do; the other is an all-reduce dearer over PCIe than the ring's 70 µs
  hops. The run cannot tell them apart, so the reverse pairing fails: host overheads fitted on
  Qwen3-32B predict the Llama run 17.1 % off on the same host (4.1 % on the RTX 4090). Its
  64 layers of 8 query heads per KV head are what the kernel-level terms changed most: each
  step pays the attention floor 64 times, and a mixed step re-reads its decodes' KV 4.1-fold
  (1 + 7 × 0.39) where a Llama-3.1-8B step does 2.2-fold; without them simkv predicted it 8.5 %
  off, fast throughout.
- **Step level, in sample (DistServe 6.1 %, Splitwise 7.2 %, not 2 %).** Even a far freer
  model does not reach 2 % on these data (*How low a fit can go*): the free linear model, with
  coefficients of its own for every tp degree and phase (27 on OPT-13B, 18 on Splitwise's TP 2
  and 4, against the roofline's 10 knobs shared by every degree), leaves 2.3 % and 3.1 %. The
  DistServe profile is itself two fitted lines with a jump at 95 sequences (TP 1, 95 sequences
  of 1,024 tokens: 86.9 ms by the small-batch line, 79.3 ms by the large-batch one); a
  continuous model splits the jump. Splitwise's batched prompts cost more per token than
  single ones at TP 4 (16 × 512 tokens: 2,886 ms; one 8,192-token prompt, with 16× the
  attention: 2,333 ms). Fitting the roofline to the mean abs. error itself rather than by
  least squares gains under a point (5.4 %, 6.7 %).
- **Step level, DistServe held out on OPT-66B.** Beyond streaming the weights at the full 2,039
  GB/s, the profile's fixed decode cost grows with TP on OPT-13B (10.9, 18.2, 22.8 ms at TP 1,
  2, 4) but is flat on OPT-66B (24.8, 23.5, 23.5, 23.1 ms at TP 2, 3, 4, 8). The fit reads the
  growth as host time per tensor-parallel worker (`worker_overhead_ms`, 2.0 ms a step for each
  worker beyond the first, as the Ray-driven vLLM of that era handed each worker its step),
  the ring's hop latency staying at a physical 2.3 µs; TP 8 decode still comes out 31 % slow.
  (Before the per-worker term the ring absorbed the growth, 13 µs a hop, 64 layers × 2
  all-reduces × 14 hops at TP 8, and TP 8 decode came out 44 % slow, held out 17.0 %.) At TP 2
  OPT-66B's weights leave ~8,900 tokens of KV per GPU and the profile charges 6.3× the HBM time
  per context token (0.0037 ms against 0.0006 ms at 2 TB/s; OPT-13B at TP 2: 1.1×). Decode steps
  whose KV cannot fit beside the weights were never measured and are not sampled (e.g. 256 ×
  2,048 tokens at TP 2). The fit holds the weight-read efficiency at 0.9 (fitted, it goes to
  its bound, 1).
  Fitted on OPT-66B's own steps the roofline leaves 5.7 %: the held-out error is what does not
  carry from one model to the other, not what the model cannot express.
- **Step level, Splitwise held out on TP 8.** Decode is predicted within 1.9 %. Prefill is
  22.4 % slow on average: per token, prefill gets dearer as the step grows, far more at TP 4
  and 8 than at TP 2 (a token's marginal cost from 1,024 to 2,048 tokens, then from 4,096 to
  8,192: TP 2 0.30 → 0.37 ms, TP 4 0.17 → 0.33 ms, TP 8 0.12 → 0.22 ms; attention's quadratic
  term adds under 10 %), a slowdown no per-token, per-prompt or all-reduce term reproduces
  across the three degrees; fitted on TP 2 and 4, TP 8's prefills of 256-2,048 tokens are
  overcharged (+35-59 %) and its batched ones of 8,192 tokens and more undercharged (8-21 %).
  Fitted on TP 8's own steps, the roofline leaves 10.0 % by least squares and 7.3 % at its
  least mean abs. error (prefill 20 % by least squares): the 10 % target is near what the
  model reaches on TP 8 in sample, and the free linear model, fitted on TP 8, still leaves
  3.8 %.
- **Kernel level.** Where a layer streams its weights (1-8 tokens) simkv is within 6 % on both
  GPUs: the weight-read efficiency of 0.9 of each preset's bandwidth is what vLLM's kernels
  reach; at 2,048 tokens the matmuls reach 0.97-1.03 of the board's sustained rate (the fitted
  GEMM efficiency, 0.98). Between the two the kernels pay for a mix of both: where the FLOP
  and stream times are equal (176-272 tokens) they take 1.3 (RTX 4090) to 1.6-1.8 (RTX PRO 6000)
  times the larger, so the classic roofline's max is 10-16 % off on the RTX PRO 6000 (column
  *max*), and the p-norm with one fitted exponent for both GPUs overshoots the RTX 4090 there
  (+34 % at 256 tokens), its worst point. The routed experts are within 5 % where the step
  streams most of them (64-128 activated), but 19-21 % fast on average with 8-16 experts and
  many tokens: vLLM's fused MoE kernel runs each expert's GEMM well below the dense rate (8
  experts at 2,048 tokens: 267 TFLOPS, 0.65 of the sustained 409), which simkv prices at the
  dense GEMM efficiency. Those rows are skewed routings: with the top-8 of 128 spread evenly, as
  simkv assumes, a step of 64 tokens already touches 125.9 experts in expectation, the 128-row
  regime (3.3 % off). The request-level fits absorb these into the host overheads; the
  kernel-level errors are the GPU terms' own.
- **Kernel level, attention.** The attention layer takes 8-17 µs a call even on the smallest
  shapes, so each layer of each step pays `attention_floor_us`; on decode-only shapes the floor
  and a KV read at 0.86 of the bandwidth leave 8-12 % (bytes alone: 35-42 %, fast on small
  shapes, slow on KV-bound ones). Beside a prefill, the decodes cost far more than alone (64
  decodes of 2,048 tokens: 545 µs beside a 16-token chunk, 398 µs alone, RTX PRO 6000,
  Llama-3.1-8B): vLLM 0.19's FlashAttention 2 then neither groups the query heads of a KV head
  nor splits the context (`mha_varlen_fwd` does both only when every sequence has one query
  token), and the fitted share of the extra per-query-head reads that reach HBM, 0.39, is
  largest on the RTX 4090 (0.57 fitted alone, 0.36-0.38 on the RTX PRO 6000), whose L2 cache is
  the smaller.
  The mixed shapes stay 24-27 % off on average: the kernel's occupancy with few decodes is not
  modelled. Prefill-only shapes are 27-37 % off: one efficiency cannot serve both the small
  chunks after a long cached context and the large prefills (15-40 % slow).
- **Figure 13.** The paper-era fit holds the weight-read efficiency at 0.9 instead of letting
  the fixed overhead absorb the weight stream, so OPT-13B's 25.7 GB of weights cost 18.4 ms a
  step at the paper's A100-40GB (1,555 GB/s) rather than the 14.0 ms of DistServe's A100-80GB:
  27.3 batched requests, 10.3 % under the paper's 30.42. Orca (Max) batches exactly 7 whenever a
  request waits; its mean is 6.95-6.96 because every step with fewer has an empty queue (with
  the defaults: 499 steps before the last arrival, 1,004 in the final drain, of 98,660).
"""


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true",
                        help="write the 'sim vs real' block of docs/fidelity.md")  # fmt: skip
    args = parser.parse_args()
    started = time.perf_counter()
    req_rows = request_level()
    step_rows, group_rows, paper_era = step_level()
    reach_rows = reach()
    kernel_rows = kernel_level()
    attention_rows = attention_level()
    fig_rows = figure13(paper_era)
    text = "\n\n".join([
        "## Sim vs real: step times against real GPUs\n\n"
        "Generated by `benchmarks/sim_vs_real.py --write-docs` "
        f"({time.perf_counter() - started:.0f} s at a load average of {os.getloadavg()[0]:.1f}, "
        f"{datetime.date.today().isoformat()}). Errors: request level, mean abs. Diff% over "
        "TTFT/TPOT/E2E × mean/p50/p90/p99; step level, mean abs. relative step-time error.",
        "### Request level: vLLM 0.19 on RTX 4090 and RTX PRO 6000 (300 ShareGPT requests at "
        "~10 req/s)",
        table(["run", "defaults", "calibrated on the run", "held out (host side)"], req_rows),
        "### Step level",
        table(["data (fit → held out)", "defaults", "calibrated", "held out"], step_rows),
        "Held out, by tensor-parallel degree and phase (bias: mean signed error, + = simkv slow):",
        table(["held out", "tp, phase", "steps", "mean abs. error", "bias"], group_rows),
        "How low a fit can go, each fitted on the steps it is scored on (mean abs. error): "
        "the roofline by least squares on log ratios (what `simkv calibrate` fits, as above), "
        "the roofline by least mean abs. error (Nelder–Mead from there), and a free linear "
        "model, non-negative coefficients of its own for every tp degree and phase, fitted "
        "exactly (a linear program): a prefill costs a + b·tokens + c·prompts + d·attention "
        "pairs + e·tokens², a decode a + b·sequences + c·KV tokens + d·sequences². It is a "
        "reference, not a model simkv could ship: it predicts no tp degree it was not fitted on.",
        table(["data", "steps", "roofline, least squares", "roofline, least abs. error",
               "knobs", "free linear, least abs. error", "coefficients"], reach_rows),
        "### Kernel level: the linear term, fitted to vLLM 0.19's kernels",
        "One decoder layer's measured matmul kernels (LLMServingSim's layer profiles, "
        "`traces/measured/llmservingsim-profiles`: `dense.csv`'s qkv, o, gate-up and down "
        "projections at 1-2,048 tokens; `moe.csv`'s routed experts by tokens and activated "
        "experts) against simkv's linear term for that layer "
        "(`RooflineCostModel.linear_s`, `simkv.calibrate.kernels.decoder_layer`); error = simkv "
        "/ measured − 1, + = simkv slow. The GPU preset is the one the profile's device name "
        "finds. The dense profiles are where the linear knobs' defaults come from: "
        f"`simkv.calibrate.kernels.fit_linear` on the five pooled, from any start, gives "
        f"{linear_fit()} (the weight-read efficiency held at its 0.9); the defaults are these, "
        "rounded. The column *max* is the error with the classic roofline's larger of the FLOP "
        "and weight-stream times (`linear_overlap_exponent` 64), the rest use the defaults.",
        table(["profile", "points", "mean abs. error", "bias", "max", "fewest tokens",
               "256 tokens", "2,048 tokens"], kernel_rows),
        "### Kernel level: the attention term, fitted to vLLM 0.19's attention layer",
        "The attention layer (`attention.csv`: at most one prefill chunk after cached tokens "
        "beside up to 256 decodes, every shape the profiler's grid holds, vLLM 0.19's "
        "FlashAttention 2 on both GPUs) is where the attention knobs' defaults come from: "
        "`simkv.calibrate.kernels.fit_attention` on the three grids pooled, from any start, "
        f"gives {attention_fit()} (the floor and KV-read efficiency from the decode-only "
        "shapes, the attention efficiency from the prefill-only ones, the re-read share from "
        "the mixed ones); the defaults are these, rounded. simkv's attention term for one "
        "layer (`RooflineCostModel.attention_s`) against the measured time, with the defaults "
        "(mean abs. error by kind of shape; bias, and in brackets the shapes, of the "
        "KV-read-bound decodes, ≥ 64 sequences of ≥ 2,048 cached tokens, and the large "
        "prefills, ≥ 1,024 tokens without decodes):",
        table(["profile", "shapes", "mean abs. error", "bias", "decode-only", "prefill-only",
               "mixed", "KV-bound decodes", "large prefills"], attention_rows),
        "### PagedAttention paper, Figure 13 (mean batched requests at the paper's rates)",
        table(["config", "paper", "simkv defaults", "paper-era profile (DistServe OPT-13B fit)"],
              fig_rows),
        WHY,
    ]) + "\n"  # fmt: skip
    print(text)
    if args.write_docs:
        write_block(ROOT / "docs" / "fidelity.md", SIM_VS_REAL, text)
    cross_gpu(args.write_docs)
    cpu_live(args.write_docs)
    saturation(args.write_docs)


if __name__ == "__main__":
    main()
