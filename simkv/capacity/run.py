"""``simkv capacity``: the highest offered rate a run config sustains within its SLOs.

The config's arrival rate is the one axis (:func:`rate_axis`: ``workload.rate`` rescales a
trace's arrival times, ``workload.arrival.rate`` sets a generator's); every rate the search
(:mod:`simkv.capacity.search`) asks for is a full run, executed like a sweep's runs
(:func:`simkv.sweep.run.run_one` on the sweep executors) into ``runs/<id>/`` with a DONE
marker, so an interrupted search resumed with the same options redoes only what is missing.
A rate *meets* when its run meets the config's SLOs (:func:`simkv.metrics.slo.meets_slos`)
and, with ``min_good_fraction``, at least that share of its requests met every SLO. A run that
fails (an error, a timeout, a dead worker) is no verdict on the SLOs: its verdict is ``None``,
the search stops (outcome ``failed``) and the answer names the first failure
(:class:`RunFailure`: its one-line error and run folder), which the CLI reports with exit 1.

The folder is also a sweep folder over the rate axis (``sweep.json``, ``sweep.parquet``: runs
in increasing rate), so ``simkv report`` draws its latency-vs-rate curves, SLO lines and knee;
``capacity.json`` holds the search's answer and every judged rate.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from simkv.capacity.search import (
    SearchError,
    SearchResult,
    Verdict,
    check_parameters,
    search,
)
from simkv.config.limits import MAX_NAME_CHARS
from simkv.config.sim import SimConfig, dump_resolved
from simkv.errors import InputError
from simkv.metrics.slo import good_fraction, meets_slos, slo_set
from simkv.outputs import make_folder, published_name
from simkv.run import load_config
from simkv.sweep.digest import run_digest
from simkv.sweep.executors import make_executor
from simkv.sweep.points import slug
from simkv.sweep.run import (
    STATUS_FAILED,
    RunTask,
    is_done,
    lost_run,
    read_summary,
    run_one,
    sweep_table,
    write_json,
    write_table,
)
from simkv.sweep.spec import PlannedRun, SweepPlan, SweepSpec

CAPACITY_FILE = "capacity.json"
RoundFn = Callable[[list[float]], None]


class Execution(Protocol):
    """Where a search's runs execute, and the floor on the share of good requests."""

    @property
    def min_good_fraction(self) -> float | None: ...
    @property
    def executor(self) -> str: ...
    @property
    def jobs(self) -> int | None: ...
    @property
    def ray_address(self) -> str | None: ...
    @property
    def run_timeout_s(self) -> float | None: ...


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """What every capacity search shares: the optional floor on the share of good requests
    (a run meets when at least that share met every SLO, besides the p99s) and where the runs
    execute (the sweep executors, with a wall-clock limit per run)."""

    min_good_fraction: float | None = None
    executor: str = "serial"
    jobs: int | None = None
    ray_address: str | None = None
    run_timeout_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class CapacityOptions(RunOptions):
    """The rate search: the rate bounds (requests/s), the relative tolerance, rates per
    round."""

    rate_min: float
    rate_max: float
    tolerance: float = 0.02
    per_round: int = 3


@dataclass(frozen=True)
class RunFailure:
    """The first failed run of a search (in judging order): the axis value it ran, its folder
    and its one-line error (the whole traceback is in ``run_dir/error.txt``)."""

    axis: str
    value: Any
    run_dir: Path
    error: str

    def record(self, out: Path) -> dict[str, Any]:
        """The failure as capacity.json holds it (the folder relative to ``out``)."""
        return {"axis": self.axis, "value": self.value,
                "run": str(self.run_dir.relative_to(out)), "error": self.error}  # fmt: skip

    def sentence(self) -> str:
        """One line: which run failed, why, and where its traceback is."""
        return (f"the run at {self.axis}={self.value:g} failed: {self.error} "
                f"({self.run_dir / 'error.txt'})")  # fmt: skip


@dataclass(frozen=True)
class CapacityResult:
    """A finished search: its result, the folder, the axis, the simulations it ran now and
    its first failed run (None unless the outcome is ``failed``)."""

    search: SearchResult
    out_dir: Path
    axis: str
    simulated: int
    reused: int
    failure: RunFailure | None = None


def _sweep_name(folder: str) -> str:
    """The folder's name as a sweep name (``sweep.json``): characters a sweep name cannot
    hold become ``_`` (an ``--out`` folder may be called anything)."""
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", folder).lstrip(".") or "capacity"
    return name[:MAX_NAME_CHARS]


def rate_axis(cfg: SimConfig) -> str:
    """The key path that sets ``cfg``'s offered rate; :class:`InputError` when none does."""
    workload = cfg.workload
    arrival = getattr(workload, "arrival", None)
    if arrival is not None:
        if getattr(arrival, "rate", None) is None:
            raise InputError(
                "capacity scales a constant arrival rate; this workload's arrival has a "
                "schedule: give workload.arrival.rate instead",
                field="workload.arrival",
            )
        return "workload.arrival.rate"
    if workload.kind == "trace":
        return "workload.rate"
    raise InputError(f"a {workload.kind} workload has no arrival rate to scale", field="workload")


class SearchRuns:
    """Plans, executes and judges the runs of one search (one folder) over one config key
    (``axis``: a rate or a replica count); ``sets`` are the ``--set`` items of every run."""

    def __init__(
        self, config: Path, sets: list[str], out: Path, opts: Execution, axis: str
    ) -> None:
        self.config, self.sets, self.out, self.opts, self.axis = config, sets, out, opts, axis
        self.base = load_config(config, sets)
        if not slo_set(self.base.slo):
            raise InputError(
                "capacity needs an objective: set slo.ttft_ms, slo.tpot_ms or slo.e2el_ms "
                "(in the config or with --set)",
                file=config,
                field="slo",
            )
        self.pool = make_executor(opts.executor, jobs=opts.jobs, ray_address=opts.ray_address)
        self.planned: dict[float, PlannedRun] = {}
        self.errors: dict[str, str] = {}
        self.hashes: dict[str, str] = {}
        self.simulated = self.reused = 0

    def plan(self, value: float) -> PlannedRun:
        cfg = load_config(self.config, [*self.sets, f"{self.axis}={value!r}"])
        text = dump_resolved(cfg)
        digest = run_digest(cfg, text, self.config.parent, self.hashes)
        point = {self.axis: value}
        return PlannedRun(f"{slug(point)}-{digest[:12]}", point, cfg, text, digest)

    def judge(self, values: list[Any]) -> dict[Any, Verdict]:
        """Run (or reuse) each value's simulation; whether each meets (None: it failed)."""
        runs_dir = self.out / "runs"
        make_folder(runs_dir)
        tasks = []
        for value in values:
            run = self.planned[value] = self.plan(value)
            if is_done(runs_dir / run.run_id, run.digest):
                self.reused += 1
                continue
            tasks.append(RunTask(
                run.run_id, run.config.model_dump(mode="json"), str(self.config.parent.resolve()),
                str((runs_dir / run.run_id).resolve()), run.point, run.digest,
                self.opts.run_timeout_s,
            ))  # fmt: skip
        for record in self.pool.map_unordered(run_one, tasks, lost_run, self.opts.run_timeout_s):
            self.simulated += 1
            if record.status == STATUS_FAILED:
                self.errors[record.run_id] = record.error or "failed"
        return {value: self.meets(self.planned[value]) for value in values}

    def meets(self, run: PlannedRun) -> Verdict:
        if run.run_id in self.errors:
            return None
        summary = self.summary(run)
        if not meets_slos(summary, run.config.slo):
            return False
        floor = self.opts.min_good_fraction
        share = good_fraction(summary)
        return floor is None or (share is not None and share >= floor)

    def summary(self, run: PlannedRun) -> dict[str, Any]:
        """The run's ``summary.json`` (empty when it has none)."""
        return read_summary(self.out / "runs" / run.run_id) or {}

    def first_failure(self, judged: tuple[tuple[Any, Verdict], ...]) -> RunFailure | None:
        """The first value judged whose run failed, in judging order (None when none did)."""
        for value, ok in judged:
            if ok is None:
                run = self.planned[value]
                error = self.errors.get(run.run_id, "failed")
                return RunFailure(self.axis, value, self.out / "runs" / run.run_id, error)
        return None

    def judged_rows(
        self, judged: tuple[tuple[Any, Verdict], ...], key: str
    ) -> list[dict[str, Any]]:
        """One row per judged value (``key``: its name): run, verdict, error and p99s."""
        rows = []
        for value, ok in judged:
            run = self.planned[value]
            summary = self.summary(run)
            rows.append({
                key: value, "run_id": run.run_id, "meets": ok,
                "error": self.errors.get(run.run_id),
                "p99_ttft_ms": summary.get("p99_ttft_ms"),
                "p99_tpot_ms": summary.get("p99_tpot_ms"),
                "good_fraction": good_fraction(summary),
                "request_throughput": summary.get("request_throughput"),
            })  # fmt: skip
        return rows

    def write(self, answer: dict[str, Any]) -> None:
        """sweep.json, sweep.parquet (runs by increasing axis value) and capacity.json."""
        runs = [self.planned[v] for v in sorted(self.planned)]
        name = _sweep_name(published_name(self.out))
        spec = SweepSpec.model_validate({"name": name, "base": str(self.config)})
        plan = SweepPlan(spec, self.config, self.config.parent, (self.axis,), tuple(runs))
        write_json(self.out / "sweep.json", {"name": spec.name, "axes": [self.axis],
                                              "runs": [r.run_id for r in runs]})  # fmt: skip
        table = sweep_table(plan, self.out / "runs", self.errors)
        write_table(self.out / "sweep.parquet", table)
        write_json(self.out / CAPACITY_FILE, answer)


def rate_answer(
    runs: SearchRuns, result: SearchResult, opts: CapacityOptions, failure: RunFailure | None
) -> dict[str, Any]:
    """capacity.json of a rate search."""
    bracket = result.bracket
    return {
        "search": "rate", "config": str(runs.config), "set": runs.sets, "axis": runs.axis,
        "slo": runs.base.slo.model_dump(), "min_good_fraction": opts.min_good_fraction,
        "rate_min": opts.rate_min, "rate_max": opts.rate_max,
        "tolerance": opts.tolerance, "per_round": opts.per_round,
        "outcome": result.outcome, "answer_rate": result.answer,
        "bracket": None if bracket is None else [bracket.meets, bracket.fails],
        "rounds": result.rounds, "simulations": len(result.judged),
        "failure": None if failure is None else failure.record(runs.out),
        "judged": runs.judged_rows(result.judged, "rate"),
    }  # fmt: skip


def check_min_good(share: float | None, field: str = "--min-good") -> None:
    """:class:`InputError` at a floor on the share of good requests outside (0, 1]."""
    if share is not None and not 0 < share <= 1:
        raise InputError(f"expected a share in (0, 1], got {share:g}", field=field)


def find_capacity(
    config: Path, sets: list[str], out: Path, opts: CapacityOptions,
    on_round: RoundFn | None = None,
) -> CapacityResult:  # fmt: skip
    """Search ``config``'s highest rate meeting its SLOs; write the folder ``out``.

    ``on_round(rates)`` is called before each round's runs. Bad input (config, ``--set``
    items, bounds, a workload without a rate) raises :class:`InputError` before anything runs.
    """
    try:
        check_parameters(opts.rate_min, opts.rate_max, opts.tolerance, opts.per_round)
    except SearchError as err:
        raise InputError(str(err), field="--rate-min/--rate-max/--tolerance") from None
    runs = SearchRuns(config, sets, out, opts, rate_axis(load_config(config, sets)))

    def judge(rates: list[float]) -> dict[float, bool]:
        if on_round is not None:
            on_round(rates)
        return runs.judge(rates)

    result = search(judge, opts.rate_min, opts.rate_max,
                    tolerance=opts.tolerance, per_round=opts.per_round)  # fmt: skip
    failure = runs.first_failure(result.judged)
    runs.write(rate_answer(runs, result, opts, failure))
    return CapacityResult(result, out, runs.axis, runs.simulated, runs.reused, failure)
