"""Saturation: the knee of every bundled real rate sweep, real against simkv.

    .venv/bin/python benchmarks/saturation.py                # prints the tables
    .venv/bin/python benchmarks/saturation.py --write-docs   # and rewrites their block of
                                                             # docs/fidelity.md ("saturation")
    .venv/bin/python benchmarks/saturation.py --quick        # defaults only, tiny-llama sweep

The sweeps are the real vLLM 0.32 CPU rate sweeps of ``traces/measured/cpu-vllm0.32/`` (the
runs of benchmarks/cpu_live.py, whose docstring describes them): every model's chat runs with
at least :data:`MIN_RATES` rates, each repeat its own sweep (the decode and long mixes have two
rates each). No public per-request rate sweep of a
GPU engine is bundled (``traces/measured/llmservingsim-vllm0.19/`` holds one rate per GPU).

The knee of a sweep is cpu_live's (:func:`cpu_live.knee`: the rate where mean TTFT first
exceeds 1 s, and where p90 TTFT exceeds 2 s, linear between the swept rates), on the measured
and the simulated side alike. simkv runs with three cost models (:data:`PROFILES`) and an
oracle:

* ``defaults``: the roofline's defaults with the matching era's host terms (vLLM 0.32 is a V1
  engine: ``host_era: vllm-v1``);
* ``calibrated``: cpu_live's profile, fitted to the engine steps of :data:`cpu_live.TRAIN`
  alone (``small-llama-chat-r2-0``, 2 req/s, below both small-llama sweeps' mean-TTFT knees);
* ``+ load terms``: that profile with the load-dependent host terms
  (:data:`LOAD_KNOBS`) fitted on the requests of :data:`LOAD_FIT` (the same run: cpu_live's
  training run, not picked by how the other rates come out), the rest of the profile held;
* :data:`ORACLE`: the calibrated profile at each run's own machine speed (not a prediction).

Every other rate is a prediction. Targets (the time-model issue): the knee within
:data:`TARGET_KNEE_PCT` of the real one, mean TTFT within :data:`TARGET_TTFT_PCT` at every
rate up to the real knee. benchmarks/saturation_steps.py asks the real steps themselves
whether they grow with the engine's waiting queue.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import cpu_live
import saturation_steps
from doc_blocks import SATURATION, write_block
from doc_blocks import markdown_table as table

from simkv.calibrate.fit import fit_run
from simkv.calibrate.runs import replay_validation, run_objective
from simkv.config.cost import RooflineCostConfig
from simkv.config.host_eras import with_host_era
from simkv.measured import read_measured_run
from simkv.run import load_config

ROOT = cpu_live.ROOT
MIN_RATES = 3
LOAD_FIT = "small-llama-chat-r2-0"
LOAD_KNOBS = ("output_token_overhead_ms", "queued_request_overhead_ms")
LOAD_EVALUATIONS = 40
"""Simulations the load-term fit may spend (two knobs; Nelder-Mead settles within ~30)."""
TARGET_KNEE_PCT = 7.0
TARGET_TTFT_PCT = 25.0
PROFILES = ("defaults", "calibrated", "+ load terms")
ORACLE = saturation_steps.ORACLE
"""Not a prediction: the calibrated profile on a device as much slower (or faster) as the
run's own engine steps were than the profile prices them (benchmarks/cpu_live.py, ``slowed``
and ``step_ratio``): what is left of the error once the machine's speed during each run is
known."""
KEYS = ("mean_ttft_ms", "p90_ttft_ms")
LIMITS_MS = {"mean_ttft_ms": cpu_live.KNEE_MEAN_TTFT_S * 1e3,
             "p90_ttft_ms": cpu_live.KNEE_P90_TTFT_S * 1e3}  # fmt: skip


@dataclass(frozen=True)
class Point:
    """One run of a sweep: its measured TTFTs and each profile's simulated ones (ms)."""

    name: str
    rate: float
    real: dict[str, float]  # key -> ms
    sim: dict[str, dict[str, float]]  # profile -> key -> ms


Sweep = tuple[str, int]  # (model, repeat); the mix is chat


def sweeps(folder: Path, models: tuple[str, ...]) -> dict[Sweep, list[tuple[float, str, Path]]]:
    """The chat sweeps of ``folder`` (at least :data:`MIN_RATES` rates), by (model, repeat):
    each run's (rate, name, folder), rates ascending."""
    found: dict[Sweep, list[tuple[float, str, Path]]] = {}
    for name, path in cpu_live._runs(folder):
        parts = cpu_live.NAME.fullmatch(name)
        if parts["mix"] == "chat" and parts["model"] in models:
            key = (parts["model"], int(parts["rep"]))
            found.setdefault(key, []).append((float(parts["rate"]), name, path))
    return {k: sorted(v) for k, v in sorted(found.items()) if len(v) >= MIN_RATES}


def fit_load_terms(folder: Path, start: RooflineCostConfig) -> tuple[RooflineCostConfig, float]:
    """``start`` with :data:`LOAD_KNOBS` fitted to the requests of :data:`LOAD_FIT` (the
    request-level fit of ``simkv calibrate RUN --fit``, every other knob held), and the fit's
    wall time in s."""
    started = time.perf_counter()
    path = folder / LOAD_FIT
    cfg = load_config(cpu_live.CONFIGS["small-llama"], [f"workload.path={path.resolve()}"])
    objective = run_objective(cfg, cpu_live.CONFIGS["small-llama"].parent, read_measured_run(path))
    result = fit_run(start, objective, LOAD_KNOBS, max_evaluations=LOAD_EVALUATIONS)
    return result.config, time.perf_counter() - started


def replay_sweep(
    runs: list[tuple[float, str, Path]], profiles: dict[str, RooflineCostConfig]
) -> list[Point]:
    """Each run of a sweep replayed with every profile, and, when there is a ``calibrated``
    one, with it at the run's own machine speed (:data:`ORACLE`)."""
    points = []
    for rate, name, path in runs:
        config = cpu_live.CONFIGS[cpu_live.NAME.fullmatch(name)["model"]]
        cfg = load_config(config, [f"workload.path={path.resolve()}"])
        run = read_measured_run(path)
        replays = [(label, cfg, profile) for label, profile in profiles.items()]
        if "calibrated" in profiles:
            ratio = cpu_live.step_ratio(cfg, path / "steps.csv", profiles["calibrated"])
            replays.append((ORACLE, *cpu_live.slowed(cfg, profiles["calibrated"], ratio)))
        sims, real = {}, {}
        for label, replay_cfg, profile in replays:
            v = replay_validation(replay_cfg, config.parent, run, profile)
            real = {k: cpu_live.value(v, k, "measured") for k in KEYS}
            sims[label] = {k: cpu_live.value(v, k, "simulated") for k in KEYS}
        points.append(Point(name, rate, real, sims))
    return points


def knees(points: list[Point], key: str) -> tuple[float | None, dict[str, float | None]]:
    """The real knee of ``key`` and each profile's (req/s; None beyond the sweep)."""
    rates = [p.rate for p in points]
    real = cpu_live.knee(rates, [p.real[key] for p in points], LIMITS_MS[key])
    sim = {label: cpu_live.knee(rates, [p.sim[label][key] for p in points], LIMITS_MS[key])
           for label in points[0].sim}  # fmt: skip
    return real, sim


def diff_pct(sim: float | None, real: float | None) -> float | None:
    """``(sim - real) / real`` in %, or None when either is missing."""
    if sim is None or real is None or math.isnan(sim) or math.isnan(real):
        return None
    return (sim - real) / real * 100


def knee_verdict(real: float | None, sim: float | None) -> str:
    """The ±:data:`TARGET_KNEE_PCT` target on one knee: met, missed, or why it cannot be read."""
    if real is None:
        return "no real knee in the sweep" + ("" if sim is None else "; sim has one: missed")
    if sim is None:
        return "missed (sim: none in the sweep)"
    return "met" if abs(diff_pct(sim, real)) <= TARGET_KNEE_PCT else "missed"


def worst_ttft_error(points: list[Point], label: str, real_knee: float | None) -> float:
    """The largest |mean TTFT error| (%) over the rates up to the real mean-TTFT knee (every
    rate when the sweep has none)."""
    limit = math.inf if real_knee is None else real_knee
    errors = [abs(diff_pct(p.sim[label]["mean_ttft_ms"], p.real["mean_ttft_ms"]))
              for p in points if p.rate <= limit]  # fmt: skip
    return max(errors)


def _ms(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def _rate(x: float | None) -> str:
    return "beyond" if x is None else f"{x:.2f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.1f} %"


def _knee_cell(real: float | None, sim: float | None) -> str:
    diff = diff_pct(sim, real)
    verdict = knee_verdict(real, sim)
    return verdict if diff is None else f"{_pct(diff)}: {verdict}"


def rate_table(all_points: dict[Sweep, list[Point]]) -> str:
    """Mean and p90 TTFT per run: real, then each profile's (Diff)."""
    rows = []
    for (model, rep), points in all_points.items():
        for p in points:
            mark = " (fitted)" if p.name in (cpu_live.TRAIN, LOAD_FIT) else ""
            cells = [f"{model} r{rep}", f"{p.rate:g}{mark}",
                     f"{_ms(p.real['mean_ttft_ms'])} / {_ms(p.real['p90_ttft_ms'])}"]  # fmt: skip
            real = p.real["mean_ttft_ms"]
            for sim in p.sim.values():
                got = sim["mean_ttft_ms"]
                cells.append(f"{_ms(got)} ({_pct(diff_pct(got, real))})")
            rows.append(cells)
    labels = list(next(iter(all_points.values()))[0].sim)
    header = ["sweep", "rate (req/s)", "real mean / p90 TTFT, ms",
              *(f"mean TTFT, {label}, ms (Diff)" for label in labels)]  # fmt: skip
    return table(header, rows)


def knee_table(all_points: dict[Sweep, list[Point]]) -> str:
    """Per sweep and profile: both knees real / sim (Diff, target) and the TTFT target."""
    rows = []
    for (model, rep), points in all_points.items():
        real_mean, sim_mean = knees(points, "mean_ttft_ms")
        real_p90, sim_p90 = knees(points, "p90_ttft_ms")
        for label in points[0].sim:
            worst = worst_ttft_error(points, label, real_mean)
            ok = "met" if worst <= TARGET_TTFT_PCT else "missed"
            rows.append([
                f"{model} r{rep}", label,
                f"{_rate(real_mean)} / {_rate(sim_mean[label])}",
                _knee_cell(real_mean, sim_mean[label]),
                f"{_rate(real_p90)} / {_rate(sim_p90[label])}",
                _knee_cell(real_p90, sim_p90[label]),
                f"{worst:.0f} %: {ok}",
            ])  # fmt: skip
    header = ["sweep", "simkv", "knee, mean TTFT > 1 s: real / sim (req/s)",
              f"Diff (±{TARGET_KNEE_PCT:g} %)", "knee, p90 TTFT > 2 s: real / sim",
              f"Diff (±{TARGET_KNEE_PCT:g} %)",
              f"worst mean-TTFT error up to the real knee (≤ {TARGET_TTFT_PCT:g} %)"]  # fmt: skip
    return table(header, rows)


def knee_diffs(all_points: dict[Sweep, list[Point]]) -> dict:
    """(model, repeat) → simkv label → (mean-TTFT knee Diff %, p90-TTFT knee Diff %)."""
    out: dict = {}
    for sweep, points in all_points.items():
        (real_mean, sim_mean), (real_p90, sim_p90) = (knees(points, k) for k in KEYS)
        out[sweep] = {
            label: (diff_pct(sim_mean[label], real_mean), diff_pct(sim_p90[label], real_p90))
            for label in sim_mean
        }
    return out


def idle_repeat(points: dict[Sweep, list[Point]]) -> str:
    """What the repeat served on an otherwise idle machine (small-llama repeat 2) shows; empty
    when it is not bundled."""
    idle = points.get(("small-llama", 2))
    if not idle:
        return ""

    def knee(value: float | None, real: float | None) -> str:
        if value is None:
            return "beyond the sweep"
        diff = diff_pct(value, real)
        return f"{value:.2f} req/s" + ("" if diff is None else f" ({diff:+.1f} %)")

    real = [p.real["mean_ttft_ms"] for p in idle]
    (mean, sim_mean), (p90, sim_p90) = (knees(idle, k) for k in KEYS)
    errors = [abs(p.sim[ORACLE]["mean_ttft_ms"] - p.real["mean_ttft_ms"]) / p.real["mean_ttft_ms"]
              for p in idle]  # fmt: skip
    top = max(p.rate for p in idle)
    return (
        "**On an idle machine** (repeat 2: the same requests up to "
        f"{top:g} req/s, nothing else running; mean TTFT {min(real):,.0f}-{max(real):,.0f} ms) "
        f"the real knees are {knee(mean, None)} (mean TTFT) and {knee(p90, None)} (p90). "
        "simkv calibrated on repeat 0's busier machine puts them at "
        f"{knee(sim_mean['calibrated'], mean)} and {knee(sim_p90['calibrated'], p90)}: the "
        "calibration carries the speed the machine had when its run was served. At the run's "
        f"own speed they are {knee(sim_mean[ORACLE], mean)} and {knee(sim_p90[ORACLE], p90)}, "
        f"with mean TTFT within {max(errors) * 100:.0f} % at every rate."
    )


def profiles(folder: Path, quick: bool) -> tuple[dict[str, RooflineCostConfig], str]:
    """The cost models of :data:`PROFILES` (``defaults`` alone when ``quick``) and a line
    naming the fitted values."""
    default = with_host_era(RooflineCostConfig(), "vllm-v1")
    if quick:
        return {"defaults": default}, "Quick mode: defaults only."
    step, step_s = cpu_live.calibrate(folder)
    loaded, load_s = fit_load_terms(folder, step)
    knobs = ", ".join(f"`{k}` {getattr(loaded, k):.3g} ms" for k in LOAD_KNOBS)
    note = (f"Calibrated on the steps of `{cpu_live.TRAIN}` ({step_s:.0f} s); load terms fitted "
            f"on the requests of `{LOAD_FIT}` ({load_s:.0f} s, at most {LOAD_EVALUATIONS} "
            f"simulations): {knobs}.")  # fmt: skip
    return {"defaults": default, "calibrated": step, "+ load terms": loaded}, note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=cpu_live.RUNS)
    quick = "the defaults alone on the tiny-llama sweep (a smoke run)"
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    if args.quick and args.write_docs:
        parser.error("--write-docs needs the full run (not --quick)")
    wall, cpu = time.perf_counter(), time.process_time()
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    found = sweeps(args.runs, ("tiny-llama",) if args.quick else tuple(cpu_live.CONFIGS))
    costs, note = profiles(args.runs, args.quick)
    points = {key: replay_sweep(runs, costs) for key, runs in found.items()}
    steps = None
    if not args.quick:
        stats = saturation_steps.queue_stats(args.runs, costs["calibrated"])
        prose = saturation_steps.findings(knee_diffs(points), stats, LOAD_FIT)
        prose = "\n\n".join(part for part in (prose, idle_repeat(points)) if part)
        steps = (saturation_steps.queue_table(stats), prose)
    timing = (f"{time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} s CPU, "
              f"load average {os.getloadavg()[0]:.2f} at the end")  # fmt: skip
    text = saturation_steps.render(found, note, timing, rate_table(points), knee_table(points),
                                   steps)  # fmt: skip
    print(text)
    if args.write_docs:
        write_block(ROOT / "docs" / "fidelity.md", SATURATION, text)
        print("wrote docs/fidelity.md")


if __name__ == "__main__":
    main()
