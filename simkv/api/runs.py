"""One run from Python: :func:`simulate` a config (a YAML path, a parsed mapping or a
:class:`SimConfig`) into a :class:`Run` (frames, summary, per-request latencies), write its
folder and report with :meth:`Run.report`, and :func:`compare` it with a measured run.

Nothing is written to disk unless asked: :meth:`Run.report` writes the folder ``simkv run``
writes (the report is rebuilt from the run's files, never from live objects, so it needs them),
and :func:`compare` writes its page and CSV only with ``out``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from simkv.config.base import parse_yaml, validate
from simkv.config.sim import SimConfig, apply_overrides, dump_resolved
from simkv.metrics.files import FrameFormat
from simkv.metrics.summary import DEFAULT_PERCENTILES
from simkv.run import RunOutput, load_config
from simkv.run import simulate as run_config
from simkv.run.load import config_of_mapping

if TYPE_CHECKING:
    from simkv.metrics.saturation import SaturationSplit
    from simkv.report.compare_real import RealComparison

ConfigInput = str | Path | Mapping[str, Any] | SimConfig
"""What :func:`simulate` takes: a YAML path, a parsed config document, or a config object."""

__all__ = ["Comparison", "ConfigInput", "Run", "RunOutput", "compare", "simulate"]


def set_items(overrides: Mapping[str, Any]) -> list[str]:
    """Keyword overrides as ``--set`` items (JSON values are YAML values)."""
    return [f"{key.replace('__', '.')}={json.dumps(value)}" for key, value in overrides.items()]


def resolve_config(
    config: ConfigInput, base_dir: str | Path | None, overrides: Mapping[str, Any]
) -> tuple[SimConfig, Path]:
    """The validated config with ``overrides`` and the folder its relative paths resolve
    against: the YAML file's folder, else ``base_dir`` (default: the working directory)."""
    sets = set_items(overrides)
    given = Path(base_dir) if base_dir is not None else None
    if isinstance(config, SimConfig):
        doc = parse_yaml(dump_resolved(config), "<SimConfig>")
        apply_overrides(doc, sets)
        return validate(SimConfig, doc), given or Path.cwd()
    if isinstance(config, Mapping):
        where = given or Path.cwd()
        return config_of_mapping(dict(config), where, sets), where
    if isinstance(config, str | Path):
        return load_config(config, sets), given or Path(config).parent
    raise TypeError(f"config: expected a path, a mapping or a SimConfig, got {type(config)}")


@dataclass(frozen=True)
class Run(RunOutput):
    """A run of :func:`simulate`: the frames (``requests``, ``steps``, ``itl``,
    ``preemptions``), ``summary``, ``latencies`` (``ttft_ms``, ``tpot_ms``, ``e2el_ms`` per
    request, as the summary computes them) and ``config``, all in memory; :meth:`report`
    writes them to a folder."""

    def report(
        self,
        out: str | Path | None = None,
        *,
        fmt: str = "parquet",
        trace: bool = False,
        force: bool = False,
    ) -> Path:
        """Write the run's folder as ``simkv run`` does (frames as ``fmt``, summary, resolved
        config, ``trace.json`` with ``trace``, ``report.html``) into ``out`` (default
        ``reports/<run name>``); returns the path of ``report.html``. The folder is replaced
        only if it holds a run (``force`` replaces any other simkv output)."""
        from simkv.outputs import Kind, new_output
        from simkv.report.run_report import REPORT_FILE, write_run_folder

        out_dir = Path(out) if out is not None else Path("reports") / self.config.name
        with new_output(out_dir, Kind.RUN, force=force) as staging:
            write_run_folder(self, staging.path, FrameFormat(fmt), trace)
        return out_dir / REPORT_FILE


def simulate(
    config: ConfigInput,
    *,
    base_dir: str | Path | None = None,
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES,
    check_invariants: bool = False,
    **overrides: Any,
) -> Run:
    """Run one simulation of ``config`` with ``overrides`` (``kv_cache__block_size=32``).

    ``config`` is a YAML path, a parsed config document (a mapping, as the YAML would load)
    or a :class:`SimConfig`. Paths in the config (traces, tables) are relative to the YAML
    file, or to ``base_dir`` (default: the working directory) for a mapping or a config
    object. Errors in the config raise :class:`simkv.errors.InputError` naming the field.
    ``percentiles`` (0–100) are added to the summary's p90 and p99.
    """
    cfg, where = resolve_config(config, base_dir, overrides)
    out = run_config(cfg, where, percentiles=percentiles, check_invariants=check_invariants)
    return Run(**{field.name: getattr(out, field.name) for field in fields(out)})


@dataclass(frozen=True)
class Comparison:
    """A run against a measured run (``simkv compare``): ``table`` has one row per metric
    (``metric``, ``measured``, ``simulated``, ``diff_pct``), ``headline`` the mean abs. Diff%
    line, ``notes`` what was left out; ``detail`` is the whole comparison the page draws;
    ``saturation`` whether each side is in overload and the headline error before and after
    the measured run saturated (:mod:`simkv.metrics.saturation`)."""

    table: pd.DataFrame
    headline: str
    notes: tuple[str, ...]
    detail: RealComparison
    written: tuple[Path, ...] = ()
    saturation: SaturationSplit | None = None


def compare(
    run: RunOutput | str | Path, *, measured: str | Path, out: str | Path | None = None
) -> Comparison:
    """Compare a run (a :class:`Run`, or a run folder) with a measured run (a vLLM run folder,
    ``vllm bench`` JSON or a request CSV), as ``simkv compare`` does; with ``out`` (a folder)
    write ``compare.html`` and ``compare.csv`` there."""
    from simkv.report.compare_real import (
        CSV_FILE,
        HTML_FILE,
        compare_run,
        compare_with_measured,
        headline_text,
        validation_frame,
        write_comparison,
    )
    from simkv.report.run_folder import run_folder_of

    if isinstance(run, RunOutput):  # the page names the run's folder: it has none
        cmp = compare_run(run_folder_of(run, Path("<in memory>")), Path(measured))
    else:
        cmp = compare_with_measured(Path(run), Path(measured))
    written: tuple[Path, ...] = ()
    if out is not None:
        folder = Path(out)
        written = tuple(write_comparison(cmp, folder / HTML_FILE, folder / CSV_FILE))
    validation = cmp.validation
    return Comparison(validation_frame(validation), headline_text(validation),
                      validation.notes, cmp, written, validation.saturation)  # fmt: skip
