"""Running a sweep: one folder per run, failure isolation, resume, and ``sweep.parquet``.

Layout of the output folder::

    runs/<run_id>/   write_run's files + point.json (axis values) + DONE, written last by an
                     atomic rename, holding the sha256 of the run's resolved config; a run that
                     raised has error.txt (message, blank line, traceback) and no DONE
    sweep.parquet    one row per run in expansion order: run_id, status, error, <axes>,
                     <summary metrics>; built from the run folders, so it is the same under
                     every executor and whether runs were resumed or not
    sweep.json       sweep name, axes and run ids in expansion order
    timings.json     wall seconds per run and in total (kept out of sweep.parquet on purpose)

A finished sweep removes the run folders of earlier sweeps that its plan does not hold. A
folder without DONE (or whose DONE names another config) is incomplete: ``resume`` redoes
exactly those runs and the failed ones.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from simkv.config.sim import SimConfig
from simkv.errors import InputError
from simkv.outputs import make_folder, remove, write_file
from simkv.run import simulate, write_run
from simkv.sweep.deadline import time_limit
from simkv.sweep.executors import make_executor
from simkv.sweep.spec import PlannedRun, SweepPlan, load_sweep
from simkv.text import read_json_file

STATUS_OK = "ok"
STATUS_FAILED = "failed"
ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class RunTask:
    """What a worker needs for one run; plain data, cheap to pickle. Paths are absolute."""

    run_id: str
    config: dict[str, Any]
    base_dir: str
    run_dir: str
    point: dict[str, Any]
    digest: str
    timeout_s: float | None = None


@dataclass(frozen=True)
class RunRecord:
    """What a worker sends back: status, the one-line error of a failed run, wall time (s)."""

    run_id: str
    status: str
    error: str | None
    wall_s: float


@dataclass(frozen=True)
class SweepResult:
    """A finished sweep: the sweep.parquet table and what this call did."""

    plan: SweepPlan
    out_dir: Path
    table: pd.DataFrame
    ran: int
    skipped: int
    failed: int
    wall_s: float


def _error_line(err: Exception) -> str:
    if isinstance(err, RunTimeout):
        text = f"timeout: {err}"
    else:
        text = str(err) if isinstance(err, InputError) else f"{type(err).__name__}: {err}"
    return " ".join(text.split())


def lost_run(task: RunTask, reason: str) -> RunRecord:
    """The failed record of a run whose worker died or was killed (``reason``), with its
    error.txt (the folder has no DONE, so a resumed sweep redoes it)."""
    run_dir = Path(task.run_dir)
    make_folder(run_dir)
    write_file(run_dir / "error.txt", reason + "\n")
    return RunRecord(task.run_id, STATUS_FAILED, reason, 0.0)  # its wall time is unknown


RUN_TABLES = ("requests.parquet", "steps.parquet", "itl.parquet")


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """A run folder's summary.json as a mapping, or None when missing, truncated or not one."""
    try:
        summary = read_json_file(run_dir / "summary.json")[0]
    except InputError:
        return None
    return summary if isinstance(summary, dict) else None


def _files_intact(run_dir: Path) -> bool:
    """The run's files are there and readable: every table a parquet file with a readable
    footer, summary.json a complete mapping, config.resolved.yaml not empty."""
    try:
        for name in RUN_TABLES:
            # an open file, never a path string: pyarrow takes "ab:12/x" as a URI
            with (run_dir / name).open("rb") as handle:
                pq.read_metadata(handle)
        resolved = (run_dir / "config.resolved.yaml").stat().st_size
    except (OSError, pa.ArrowException):
        return False
    return resolved > 0 and read_summary(run_dir) is not None


def is_done(run_dir: Path, digest: str) -> bool:
    """True when ``run_dir`` holds a complete run whose digest (config and the files it names,
    :func:`simkv.sweep.digest.run_digest`) is ``digest``, with intact files."""
    try:
        marked = (run_dir / "DONE").read_text(encoding="utf-8").strip() == digest
    except OSError:
        return False
    return marked and _files_intact(run_dir)


class RunTimeout(Exception):
    """A run went past the sweep's per-run wall-clock limit."""


def run_one(task: RunTask) -> RunRecord:
    """Simulate one run into a fresh ``run_dir``; any exception (a timeout too) becomes a
    failed record."""
    run_dir = Path(task.run_dir)
    remove(run_dir)  # no file of an earlier attempt may survive into this one
    make_folder(run_dir)
    write_file(run_dir / "point.json", json.dumps(task.point, indent=2) + "\n")
    started, limit = time.perf_counter(), task.timeout_s
    try:
        with time_limit(limit, lambda: RunTimeout(f"ran longer than {limit:g} s")):
            cfg = SimConfig.model_validate(task.config)
            write_run(simulate(cfg, Path(task.base_dir)), run_dir)
    except Exception as err:  # one run's failure is that run's result; the sweep goes on
        message = _error_line(err)
        write_file(run_dir / "error.txt", f"{message}\n\n{traceback.format_exc()}")
        return RunRecord(task.run_id, STATUS_FAILED, message, time.perf_counter() - started)
    wall_s = time.perf_counter() - started
    write_file(run_dir / "DONE", task.digest + "\n")
    return RunRecord(task.run_id, STATUS_OK, None, wall_s)


def _column(values: list[Any]) -> pd.Series:
    """One typed column: Int64 / float64 / boolean / str; mixed kinds are stored as JSON text."""
    present = [value for value in values if value is not None]
    if all(isinstance(value, bool) for value in present) and present:
        return pd.Series(values, dtype="boolean")
    if all(isinstance(value, int) and not isinstance(value, bool) for value in present) and present:
        return pd.Series(values, dtype="Int64")
    if all(isinstance(value, int | float) and not isinstance(value, bool) for value in present):
        return pd.Series([float("nan") if v is None else v for v in values], dtype="float64")
    if all(isinstance(value, str) for value in present):
        return pd.Series(values, dtype="str")
    return pd.Series([None if v is None else json.dumps(v) for v in values], dtype="str")


def sweep_table(plan: SweepPlan, runs_dir: Path, errors: dict[str, str]) -> pd.DataFrame:
    """The sweep.parquet table from the run folders; ``errors`` holds failed runs' messages.

    A run neither complete nor in ``errors`` is an internal error (the executor lost it).
    """
    rows: list[tuple[str, str | None, dict[str, Any]]] = []
    for run in plan.runs:
        run_dir = runs_dir / run.run_id
        if run.run_id in errors:
            rows.append((STATUS_FAILED, errors[run.run_id], {}))
        elif is_done(run_dir, run.digest):
            rows.append((STATUS_OK, None, read_summary(run_dir) or {}))
        else:
            raise RuntimeError(f"run {run.run_id} is neither complete nor failed")
    metrics = list(dict.fromkeys(key for _, _, summary in rows for key in summary))
    columns: dict[str, pd.Series] = {
        "run_id": pd.Series([run.run_id for run in plan.runs], dtype="str"),
        "status": pd.Series([status for status, _, _ in rows], dtype="str"),
        "error": pd.Series([error for _, error, _ in rows], dtype="str"),
    }
    for axis in plan.axes:
        columns[axis] = _column([run.point.get(axis) for run in plan.runs])
    for key in metrics:
        if key not in columns:
            columns[key] = _column([summary.get(key) for _, _, summary in rows])
    return pd.DataFrame(columns)


def _prune(runs_dir: Path, keep: set[str]) -> None:
    """Remove the run folders of earlier sweeps (not in ``keep``): a sweep folder holds this
    sweep's runs and nothing stale."""
    for entry in runs_dir.iterdir():
        if entry.name not in keep:
            remove(entry)


def first_failure(table: pd.DataFrame) -> tuple[str, str] | None:
    """The first failed run of a sweep.parquet table (in the sweep's order): its id and
    one-line error; None when every run finished."""
    failed = table[table["status"] == STATUS_FAILED]
    if failed.empty:
        return None
    return str(failed["run_id"].iloc[0]), str(failed["error"].iloc[0])


def default_out_dir(plan: SweepPlan) -> Path:
    """``reports/<sweep name>``, the CLI's default output folder."""
    return Path("reports") / plan.spec.name


def _task(plan: SweepPlan, run: PlannedRun, runs_dir: Path, timeout_s: float | None) -> RunTask:
    return RunTask(
        run_id=run.run_id,
        config=run.config.model_dump(mode="json"),
        base_dir=str(plan.base_dir.resolve()),
        run_dir=str((runs_dir / run.run_id).resolve()),
        point=run.point,
        digest=run.digest,
        timeout_s=timeout_s,
    )


def write_json(path: Path, data: Any) -> None:
    """``data`` as indented JSON, written atomically."""
    write_file(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def write_table(path: Path, table: pd.DataFrame) -> None:
    """``table`` as Parquet, written atomically through a handle (never a path: pyarrow reads
    a path like ab:12/x as a URI)."""
    write_file(path, lambda handle: table.to_parquet(handle, index=False))


def _previous_timings(path: Path) -> dict[str, float]:
    try:
        return dict(read_json_file(path)[0]["runs"])
    except (InputError, ValueError, KeyError, TypeError):
        return {}


def run_sweep(
    sweep_path: str | Path | SweepPlan,
    out_dir: str | Path | None = None,
    *,
    executor: str = "serial",
    jobs: int | None = None,
    resume: bool = False,
    ray_address: str | None = None,
    progress: ProgressFn | None = None,
    run_timeout_s: float | None = None,
) -> SweepResult:
    """Run every point of a sweep file (or of a loaded plan); each run's folder is written as
    soon as it finishes.

    ``resume`` skips runs whose folder is complete for the same config. ``progress(done,
    total)`` is called once before the first run (done = runs skipped) and after each run.
    Input errors (sweep file, a point that does not validate, executor) raise
    :class:`InputError` before anything runs; a run that raises, whose worker dies, or that runs
    past ``run_timeout_s`` (else the sweep file's ``run_timeout_s``) is recorded as failed.
    """
    started = time.perf_counter()
    plan = sweep_path if isinstance(sweep_path, SweepPlan) else load_sweep(sweep_path)
    out = Path(out_dir) if out_dir is not None else default_out_dir(plan)
    pool = make_executor(executor, jobs=jobs, ray_address=ray_address)
    runs_dir = out / "runs"
    make_folder(runs_dir)
    write_json(out / "sweep.json", {"name": plan.spec.name, "axes": list(plan.axes),
                                     "runs": [run.run_id for run in plan.runs]})  # fmt: skip
    todo = [r for r in plan.runs if not (resume and is_done(runs_dir / r.run_id, r.digest))]
    timings = _previous_timings(out / "timings.json") if resume else {}
    done, total = len(plan.runs) - len(todo), len(plan.runs)
    if progress is not None:
        progress(done, total)
    errors: dict[str, str] = {}
    timeout_s = run_timeout_s if run_timeout_s is not None else plan.spec.run_timeout_s
    tasks = [_task(plan, run, runs_dir, timeout_s) for run in todo]
    for record in pool.map_unordered(run_one, tasks, lost_run, timeout_s):
        timings[record.run_id] = record.wall_s
        if record.status == STATUS_FAILED:
            errors[record.run_id] = record.error or "failed"
        done += 1
        if progress is not None:
            progress(done, total)
    table = sweep_table(plan, runs_dir, errors)
    _prune(runs_dir, {run.run_id for run in plan.runs})
    write_table(out / "sweep.parquet", table)
    wall_s = time.perf_counter() - started
    ordered = {run.run_id: timings[run.run_id] for run in plan.runs if run.run_id in timings}
    write_json(out / "timings.json", {"executor": executor, "total_wall_s": wall_s,
                                       "runs": ordered})  # fmt: skip
    return SweepResult(plan, out, table, len(todo), total - len(todo), len(errors), wall_s)
