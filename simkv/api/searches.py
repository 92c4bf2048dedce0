"""Many runs from Python: :func:`sweep` (``simkv sweep``) and :func:`capacity`
(``simkv capacity``), each a thin layer over the code the command runs.

Both run their simulations as folders (``runs/<id>/``: the executors hand each run's files
over through its folder, and a search reuses finished runs from it), so they always work in
a folder: ``out`` when given (published as the command publishes it, with ``report.html``),
else a temporary folder that is removed before returning. What they return is read from that
folder first: the table of runs (``sweep.parquet``), the answer (``capacity.json``) and the
report's summary lines. Give ``out`` to keep each run's frames and the report.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from simkv.api.runs import set_items
from simkv.capacity.curve import find_curve
from simkv.capacity.replicas import (
    CountFound,
    CountOptions,
    check_options,
    find_cheapest,
    find_min_count,
)
from simkv.capacity.run import CAPACITY_FILE, CapacityOptions, check_min_good, find_capacity
from simkv.config.base import mapping_doc
from simkv.config.fleet_options import load_fleet_options
from simkv.outputs import Kind, Staging, new_output
from simkv.sweep.run import run_sweep
from simkv.sweep.spec import SweepPlan, load_sweep, plan_sweep
from simkv.text import read_json_file

__all__ = ["CapacityOutput", "SweepOutput", "capacity", "sweep"]


@dataclass(frozen=True)
class SweepOutput:
    """A finished sweep: ``table`` is ``sweep.parquet`` (one row per run in the sweep's
    order: ``run_id``, ``status``, ``error``, the axes, the summary metrics), ``summary`` the
    report's summary lines (best run, SLOs met, the knee of a rate sweep), ``failed`` the
    number of failed runs; ``out_dir`` is the folder kept (None without ``out``)."""

    name: str
    axes: tuple[str, ...]
    table: pd.DataFrame
    summary: list[str]
    failed: int
    wall_s: float
    out_dir: Path | None


@dataclass(frozen=True)
class CapacityOutput:
    """A finished capacity search: ``answer`` is ``capacity.json`` (the outcome, the answer
    rate or replica count, every judged value with its p99s), ``table`` the runs simulated
    (``sweep.parquet``; with ``options``, every option's with an ``option`` column),
    ``summary`` the report's answer lines; ``out_dir`` is the folder kept (None without
    ``out``)."""

    answer: dict[str, Any]
    table: pd.DataFrame
    summary: list[str]
    out_dir: Path | None


@contextmanager
def _folder(
    out: str | Path | None, kind: Kind, force: bool
) -> Iterator[tuple[Path, Staging | None]]:
    """The folder to work in: ``out`` staged and published as the CLI does, else a temporary
    folder removed afterwards; with the staging (None for a temporary folder)."""
    if out is None:
        with tempfile.TemporaryDirectory(prefix="simkv-") as tmp:
            yield Path(tmp), None
        return
    with new_output(Path(out), kind, force=force) as staging:
        yield staging.path, staging


def _kept(out: str | Path | None, staging: Staging | None) -> Path | None:
    """Where the output is: ``out``, or the staging folder beside it when the command kept it
    aside (failed runs over a complete earlier output); None without ``out``."""
    if out is None or staging is None:
        return None
    return staging.path if staging.keep else Path(out)


def _summary(folder: Path) -> list[str]:
    """The summary box of the folder's report (:mod:`simkv.report.sweep_report`)."""
    from simkv.report.capacity_summary import capacity_lines
    from simkv.report.sweep_report import load_sweep_folder, summary_lines

    return capacity_lines(folder) + summary_lines(load_sweep_folder(folder))


def _report(folder: Path) -> None:
    from simkv.report.sweep_report import write_sweep_report

    write_sweep_report(folder)


def _plan(spec: str | Path | Mapping[str, Any], base_dir: str | Path | None) -> SweepPlan:
    if isinstance(spec, Mapping):
        where = Path(base_dir) if base_dir is not None else Path.cwd()
        return plan_sweep(mapping_doc(dict(spec), where), where / "<sweep>")
    return load_sweep(spec)


def sweep(
    spec: str | Path | Mapping[str, Any],
    out: str | Path | None = None,
    *,
    base_dir: str | Path | None = None,
    executor: str = "serial",
    jobs: int | None = None,
    resume: bool = False,
    ray_address: str | None = None,
    run_timeout_s: float | None = None,
    force: bool = False,
) -> SweepOutput:
    """Run every point of a sweep (a sweep file, or its parsed mapping whose ``base`` path is
    relative to ``base_dir``, default the working directory), as ``simkv sweep`` does; with
    ``out``, the sweep folder and its report are written there. Bad input raises
    :class:`simkv.errors.InputError` before anything runs; failed runs are rows with
    ``status == "failed"``."""
    plan = _plan(spec, base_dir)
    with _folder(out, Kind.SWEEP, force) as (folder, staging):
        result = run_sweep(plan, folder, executor=executor, jobs=jobs, resume=resume,
                           ray_address=ray_address, run_timeout_s=run_timeout_s)  # fmt: skip
        if staging is not None:
            _report(folder)
            staging.keep = bool(result.failed) and staging.earlier
        summary = _summary(folder)
    return SweepOutput(plan.spec.name, plan.axes, result.table, summary, result.failed,
                       result.wall_s, _kept(out, staging))  # fmt: skip


def _count_searches(
    path: Path, sets: list[str], folder: Path, counts: CountOptions, rates: list[float],
    options: str | Path | None,
) -> tuple[list[CountFound], list[float]]:  # fmt: skip
    """Every count search of ``simkv capacity --at-rate`` (one rate, or a curve of several)
    and the rate of each."""
    priced = None if options is None else load_fleet_options(Path(options))
    for rate in rates:
        if priced is not None:
            check_options(path, sets, rate, priced, Path(options))  # type: ignore[arg-type]
    if len(rates) > 1:
        points = find_curve(path, sets, folder, counts, rates, priced)
        return [f for p in points for f in p.found], [p.at_rate for p in points for _ in p.found]
    if priced is None:
        return [find_min_count(path, sets, folder, counts)], rates
    found = find_cheapest(path, sets, folder, counts, priced)
    return found, rates * len(found)


def _reports(folder: Path, searches: list[Path], priced: bool, curve: bool) -> None:
    """The reports the command writes: each search's sweep report and the options page, or
    for a curve its pages (:func:`simkv.report.curve_report.write_curve_report`)."""
    if curve:
        from simkv.report.curve_report import write_curve_report

        write_curve_report(folder)
        return
    for one in searches:
        _report(one)
    if priced:
        from simkv.report.options_report import write_options_report

        write_options_report(folder)


def capacity(
    config: str | Path,
    out: str | Path | None = None,
    *,
    rate_min: float = 0.25,
    rate_max: float = 32.0,
    tolerance: float = 0.02,
    per_round: int = 3,
    min_good: float | None = None,
    at_rate: float | Sequence[float] | None = None,
    count_min: int = 1,
    count_max: int = 64,
    options: str | Path | None = None,
    executor: str = "serial",
    jobs: int | None = None,
    ray_address: str | None = None,
    run_timeout_s: float | None = None,
    force: bool = False,
    **overrides: Any,
) -> CapacityOutput:
    """The highest offered rate ``config`` (a YAML path, with ``overrides``) sustains within
    its SLOs (``rate_min`` … ``rate_max``, to ``tolerance``), as ``simkv capacity`` does; with
    ``at_rate``, the fewest replicas meeting them at that rate (``count_min`` …
    ``count_max``), and with ``options`` too (a priced-options YAML), the cheapest fleet; a
    list of rates is one such search per rate (the curve of ``--at-rate 4,8,16``; ``table``
    gains ``at_rate``). With ``out`` the search folder and its report are written there (a
    search reuses the finished runs of an earlier one in the same folder)."""
    path, sets = Path(config), set_items(overrides)
    check_min_good(min_good, field="min_good")
    runs: dict[str, Any] = {
        "min_good_fraction": min_good, "executor": executor, "jobs": jobs,
        "ray_address": ray_address, "run_timeout_s": run_timeout_s,
    }  # fmt: skip
    rates = [] if at_rate is None else [at_rate] if isinstance(at_rate, int | float) else [
        float(rate) for rate in at_rate]  # fmt: skip
    curve = len(rates) > 1
    with _folder(out, Kind.CAPACITY, force) as (folder, staging):
        if not rates:
            opts = CapacityOptions(rate_min=rate_min, rate_max=rate_max, tolerance=tolerance,
                                   per_round=per_round, **runs)  # fmt: skip
            rate = find_capacity(path, sets, folder, opts)
            folders, failed = [rate.out_dir], rate.failure is not None
        else:
            counts = CountOptions(at_rate=rates[0], count_min=count_min, count_max=count_max,
                                  per_round=per_round, **runs)  # fmt: skip
            found, rate_of = _count_searches(path, sets, folder, counts, rates, options)
            folders = [one.out_dir for one in found]
            failed = any(one.failure is not None for one in found)
        if staging is not None:
            _reports(folder, folders, options is not None, curve)
            staging.keep = failed and staging.earlier
        answer = read_json_file(folder / CAPACITY_FILE)[0]
        tables = [pd.read_parquet(one / "sweep.parquet") for one in folders]
        summary = list(dict.fromkeys(line for one in folders for line in _summary(one)))
    if options is not None:
        tables = [t.assign(option=one.name) for t, one in zip(tables, folders, strict=True)]
    if curve:
        tables = [t.assign(at_rate=rate_of[i]) for i, t in enumerate(tables)]
    table = pd.concat(tables, ignore_index=True) if len(tables) > 1 else tables[0]
    return CapacityOutput(answer, table, summary, _kept(out, staging))
