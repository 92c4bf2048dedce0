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
and the simulated side alike. simkv runs with five cost models per CPU (:data:`PROFILES`) and
an oracle:

* ``defaults``: the roofline's defaults with the matching era's host terms (vLLM 0.32 is a V1
  engine: ``host_era: vllm-v1``);
* ``calibrated``: cpu_live's profile of the CPU the sweep ran on, fitted to the engine steps
  of that CPU's training run alone (:func:`cpu_live.train_runs`: its first repeat's 2 req/s
  run, below every small-llama sweep's mean-TTFT knee);
* ``+ load terms``: that profile with the load-dependent host terms (:data:`LOAD_KNOBS`)
  fitted on the requests of the same run (not picked by how the other rates come out), the
  rest of the profile held;
* :data:`FULL_BATCH`: the step fit on the first run of the CPU's first repeat, by rate, whose
  steps filled the engine's batch (``max_num_seqs`` sequences, from its meta.json): chosen by
  what the fit's steps cover, never by how TTFT comes out;
* :data:`SWAPPED`: the other CPU's ``calibrated`` profile on this CPU's preset (cpu_live);
* :data:`ORACLE`: the calibrated profile at each run's own machine speed (not a prediction).

Every other rate is a prediction. Targets (the time-model issue): the knee within
:data:`TARGET_KNEE_PCT` of the real one, mean TTFT within :data:`TARGET_TTFT_PCT` at every
rate up to the real knee. The two quiet repeats of the Zen 4 (:data:`POOLED`) are also
averaged rate by rate into one more sweep (:func:`pooled`), since near the knee one run's real
TTFT is itself uncertain. benchmarks/saturation_steps.py asks the real steps themselves
whether they grow with the engine's waiting queue.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import cpu_live
import saturation_prose
import saturation_steps
from doc_blocks import SATURATION, write_block
from doc_blocks import markdown_table as table
from saturation_prose import Facts

from simkv.calibrate.fit import fit_run
from simkv.calibrate.runs import replay_validation, run_objective
from simkv.config.cost import RooflineCostConfig
from simkv.config.host_eras import with_host_era
from simkv.measured import read_measured_run

ROOT = cpu_live.ROOT
MIN_RATES = 3
LOAD_KNOBS = ("output_token_overhead_ms", "queued_request_overhead_ms")
LOAD_EVALUATIONS = 40
"""Simulations the load-term fit may spend (two knobs; Nelder-Mead settles within ~30)."""
TARGET_KNEE_PCT = 7.0
TARGET_TTFT_PCT = 25.0
FULL_BATCH = saturation_prose.FULL_BATCH
SWAPPED = saturation_prose.SWAPPED
ZEN4 = saturation_prose.ZEN4
PROFILES = ("defaults", "calibrated", "+ load terms", FULL_BATCH, SWAPPED)
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


Sweep = tuple[str, int | str]  # (model, repeat, or "a+b" for a pooled pair); the mix is chat
BUNDLED_ONLY = (
    "The findings are written for the bundled runs (traces/measured/cpu-vllm0.32/, whose "
    "repeats and CPUs they name); for other runs, read the tables."
)
POOLED = (2, 3)
"""Two repeats that served the same requests on the same CPU with the machine otherwise quiet
(load ≤ 1.3 throughout): :func:`pooled` averages them rate by rate into one more sweep."""


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


def fit_load_terms(path: Path, start: RooflineCostConfig) -> tuple[RooflineCostConfig, float]:
    """``start`` with :data:`LOAD_KNOBS` fitted to the requests of the run at ``path`` (the
    request-level fit of ``simkv calibrate RUN --fit``, every other knob held), and the fit's
    wall time in s."""
    started = time.perf_counter()
    cfg, config, _ = cpu_live.run_config(path)
    objective = run_objective(cfg, config.parent, read_measured_run(path))
    result = fit_run(start, objective, LOAD_KNOBS, max_evaluations=LOAD_EVALUATIONS)
    return result.config, time.perf_counter() - started


def full_batch_run(folder: Path, train: Path) -> Path | None:
    """The :data:`FULL_BATCH` training run of a device whose training run is ``train``: of the
    small-llama chat runs of ``train``'s repeat, the lowest rate whose steps reached the
    engine's ``max_num_seqs`` (meta.json); None when none did."""
    train = cpu_live.NAME.fullmatch(train.name)
    repeat = sweeps(folder, ("small-llama",)).get(("small-llama", int(train["rep"])), [])
    for _, _, path in repeat:
        limit = json.loads((path / "meta.json").read_text())["engine_kwargs"]["max_num_seqs"]
        if cpu_live.largest_batch(path) >= limit:
            return path
    return None


def replay_sweep(
    runs: list[tuple[float, str, Path]], by_device: dict[str, dict[str, RooflineCostConfig]]
) -> list[Point]:
    """Each run of a sweep replayed with every profile of the CPU it ran on, and, when there
    is a ``calibrated`` one, with it at the run's own machine speed (:data:`ORACLE`)."""
    points = []
    for rate, name, path in runs:
        cfg, config, served = cpu_live.run_config(path)
        profiles = by_device[served]
        run = read_measured_run(path)
        replays = [(label, cfg, profile) for label, profile in profiles.items()]
        if "calibrated" in profiles:
            ratio = cpu_live.step_ratio(path, profiles["calibrated"])
            replays.append((ORACLE, *cpu_live.slowed(cfg, profiles["calibrated"], ratio)))
        sims, real = {}, {}
        for label, replay_cfg, profile in replays:
            v = replay_validation(replay_cfg, config.parent, run, profile)
            real = {k: cpu_live.value(v, k, "measured") for k in KEYS}
            sims[label] = {k: cpu_live.value(v, k, "simulated") for k in KEYS}
        points.append(Point(name, rate, real, sims))
    return points


def pooled(a: list[Point], b: list[Point]) -> list[Point]:
    """The rates of two repeats of one sweep, each measured and simulated TTFT the mean of the
    two: the same requests served twice, so the mean is a better estimate of what the engine
    does at that rate than either run (near the knee one repeat's mean TTFT can be twice the
    other's)."""
    other = {p.rate: p for p in b}
    out = []
    for p in a:
        q = other.get(p.rate)
        if q is not None:
            real = {k: (p.real[k] + q.real[k]) / 2 for k in p.real}
            sim = {
                label: {k: (v[k] + q.sim[label][k]) / 2 for k in v} for label, v in p.sim.items()
            }
            out.append(Point(f"{p.name}+{q.name}", p.rate, real, sim))
    return out


def widest(points: dict[Sweep, list[Point]]) -> tuple[float, float, float, float] | None:
    """Of the :data:`POOLED` repeats' rates up to their pooled real mean-TTFT knee, the one
    where their real mean TTFTs differ most: (rate, one's, the other's, the pooled full-batch
    simulation's), ms; None when the pair is not there."""
    pair = [points.get(("small-llama", rep)) for rep in POOLED]
    both = points.get(("small-llama", "+".join(map(str, POOLED))))
    if not (all(pair) and both) or FULL_BATCH not in both[0].sim:
        return None
    knee = knees(both, "mean_ttft_ms")[0] or math.inf
    first, second = ({p.rate: p.real["mean_ttft_ms"] for p in ps} for ps in pair)
    sims = {p.rate: p.sim[FULL_BATCH]["mean_ttft_ms"] for p in both}
    rates = [r for r in sims if r <= knee]
    rate = max(rates, key=lambda r: max(first[r], second[r]) / min(first[r], second[r]))
    return rate, first[rate], second[rate], sims[rate]


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


def rate_table(all_points: dict[Sweep, list[Point]], fitted: dict[str, str]) -> str:
    """Mean and p90 TTFT per run: real, then each profile's (Diff); ``fitted``: the name of
    each run a profile was fitted on → what was fitted on it."""
    rows = []
    for (model, rep), points in all_points.items():
        for p in points:
            marks = [fitted[part] for part in p.name.split("+") if part in fitted]
            mark = f" ({marks[0]})" if marks else ""
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


Profiles = dict[str, dict[str, RooflineCostConfig]]
"""Device → label (:data:`PROFILES`) → cost model."""


@dataclass(frozen=True)
class Fits:
    """The cost models (:data:`Profiles`), a line naming the fitted runs and values, each
    fitted run's name → what was fitted on it, and each device's full-batch run."""

    profiles: Profiles
    note: str
    trained: dict[str, str]
    train_runs: dict[str, str]  # device -> its training run's name
    full_runs: dict[str, Path]


def profiles(folder: Path, quick: bool) -> Fits:
    """Per device, the cost models of :data:`PROFILES` (``defaults`` alone when ``quick``)."""
    default = with_host_era(RooflineCostConfig(), "vllm-v1")
    if quick:
        only = {gpu: {"defaults": default} for gpu in cpu_live.CPU}
        return Fits(only, "Quick mode: defaults only.", {}, {}, {})
    fitted = cpu_live.calibrate(folder)
    out: Profiles = {}
    notes, trained, full_runs = [], {}, {}
    for gpu, fit in fitted.items():
        step = fit.profile
        loaded, load_s = fit_load_terms(fit.run, step)
        full = full_batch_run(folder, fit.run)
        out[gpu] = {"defaults": default, "calibrated": step, "+ load terms": loaded}
        trained[fit.run.name] = "fitted"
        knobs = ", ".join(f"`{k}` {getattr(loaded, k):.3g} ms" for k in LOAD_KNOBS)
        note = (f"on {cpu_live.CPU.get(gpu, gpu)}, calibrated on the steps of "
                f"`{fit.run.name}` ({fit.seconds:.0f} s), load terms on its requests "
                f"({load_s:.0f} s): {knobs}")  # fmt: skip
        if full is not None:
            out[gpu][FULL_BATCH] = cpu_live.fit_profile(
                [full / "steps.csv"], model="small-llama", gpu=gpu).result.config  # fmt: skip
            trained[full.name], full_runs[gpu] = "fitted: full batch", full
            seq = out[gpu][FULL_BATCH].seq_overhead_ms
            note += f"; on a full batch: `{full.name}` (`seq_overhead_ms` {seq:.3g})"
        notes.append(note)
    for gpu, labels in out.items():
        other = next((p for d, p in fitted.items() if d != gpu), None)
        if other is not None:
            labels[SWAPPED] = other.profile
    train = {gpu: fit.run.name for gpu, fit in fitted.items()}
    return Fits(out, "Fitted " + "; ".join(notes) + ".", trained, train, full_runs)


def facts(
    folder: Path,
    found: dict[Sweep, list[tuple[float, str, Path]]],
    fits: Fits,
    points: dict[Sweep, list[Point]],
) -> tuple[Facts, str, str]:
    """What the prose reads, and the queue and batch tables (``found``: :func:`sweeps`)."""
    calibrated = {gpu: labels["calibrated"] for gpu, labels in fits.profiles.items()}
    stats = saturation_steps.queue_stats(folder, calibrated)
    zen4 = [path for name, path in cpu_live._runs(folder)
            if cpu_live.device(path) == ZEN4 and name.startswith("small-llama-chat")]  # fmt: skip
    fitted = {
        k: v for k, v in fits.profiles.get(ZEN4, {}).items() if k in ("calibrated", FULL_BATCH)
    }
    batches, top = saturation_steps.batch_table(zen4, fitted)
    worst, real_knees = {}, {}
    for sweep, sweep_points in points.items():
        (mean, _), (p90, _) = (knees(sweep_points, k) for k in KEYS)
        real_knees[sweep] = (mean, p90)
        worst[sweep] = {label: worst_ttft_error(sweep_points, label, mean)
                        for label in sweep_points[0].sim}  # fmt: skip
    largest = {name: cpu_live.largest_batch(folder / name) for name in fits.trained}
    full = {gpu: p.name for gpu, p in fits.full_runs.items()}
    loads = {}
    for sweep, runs in found.items():
        after = [json.loads((path / "meta.json").read_text())["hardware"]["load_average_after"][0]
                 for _, _, path in runs]  # fmt: skip
        loads[sweep] = (min(after), max(after))
    f = Facts(knee_diffs(points), worst, real_knees, fits.profiles, fits.train_runs, full,
              largest, {ZEN4: top}, stats, loads, widest(points))  # fmt: skip
    return f, saturation_steps.queue_table(stats), batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=cpu_live.RUNS)
    quick = "the defaults alone on the tiny-llama sweep (a smoke run)"
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    if args.quick and args.write_docs:
        parser.error("--write-docs needs the full run (not --quick)")
    write(args.write_docs, args.runs, args.quick)


def write(write_docs: bool, runs: Path = cpu_live.RUNS, quick: bool = False) -> str:
    """Print the block (and write it into docs/fidelity.md if ``write_docs``); its text."""
    wall, cpu = time.perf_counter(), time.process_time()
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    found = sweeps(runs, ("tiny-llama",) if quick else tuple(cpu_live.CONFIGS))
    fits = profiles(runs, quick)
    points: dict[Sweep, list[Point]] = {
        key: replay_sweep(sweep_runs, fits.profiles) for key, sweep_runs in found.items()
    }
    pair = [points.get(("small-llama", rep)) for rep in POOLED]
    if all(pair):
        points[("small-llama", "+".join(map(str, POOLED)))] = pooled(*pair)
    steps = None
    if not quick:
        known, queue, batches = facts(runs, found, fits, points)
        prose = (saturation_prose.findings(known) if runs.resolve() == cpu_live.RUNS.resolve()
                 else BUNDLED_ONLY)  # fmt: skip
        steps = (queue, batches, prose)
    timing = (f"{time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} s CPU, "
              f"load average {os.getloadavg()[0]:.2f} at the end")  # fmt: skip
    text = saturation_prose.render(found, fits.note, timing, rate_table(points, fits.trained),
                                   knee_table(points), steps)  # fmt: skip
    print(text)
    if write_docs:
        write_block(ROOT / "docs" / "fidelity.md", SATURATION, text)
        print("wrote docs/fidelity.md")
    return text


if __name__ == "__main__":
    main()
