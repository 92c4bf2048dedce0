"""The end of ``simkv sweep`` in the terminal: a compact table, one row per run (its number,
the axis values, the SLO verdict when SLOs are set, goodput (else throughput), p99 TTFT and
TPOT), then the report's headline. Fits 80 columns for sweeps of up to three short axes; the
report holds every other column."""

from __future__ import annotations

from rich import box
from rich.table import Table

from simkv.report import sweep_summary as sm
from simkv.report.sweep_folder import STATUS_OK, SweepFolder, axis_value, py_value, run_number
from simkv.report.sweep_table import TABLE_METRICS

FORMATS = {column: fmt for column, _, fmt in TABLE_METRICS}
"""The cell format of each metric, as the report's table of all runs prints it."""
COLUMNS = (("p99_ttft_ms", "p99 TTFT"), ("p99_tpot_ms", "p99 TPOT"))
"""(summary column, header) of the latencies after the objective (cells carry their unit:
:func:`~simkv.report.conventions.format_ms`, ms below 10 s, then s)."""


def axis_headers(axes: tuple[str, ...]) -> list[str]:
    """Each axis by its last dotted part (``rate`` for ``workload.rate``) unless two share it."""
    short = [axis.rsplit(".", 1)[-1] for axis in axes]
    return [s if short.count(s) == 1 else axis for s, axis in zip(short, axes, strict=True)]


def sweep_table(sweep: SweepFolder) -> Table:
    """The compact table of ``sweep``'s runs, in sweep order."""
    judged = sm.has_slo(sweep.ok)
    metric = sm.objective(sweep.ok) if not sweep.ok.empty else sm.THROUGHPUT
    met = sm.meets_slo(sweep.table) if judged else None
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=f"sweep {sweep.name}")
    table.add_column("#", justify="right")
    for header in axis_headers(sweep.axes):
        table.add_column(header, overflow="fold", min_width=min(len(header), 20))
    if met is not None:
        table.add_column("SLOs")
    shown = "goodput req/s" if metric == sm.GOODPUT else "req/s"
    for header in (shown, *(h for _, h in COLUMNS)):
        table.add_column(header, justify="right")
    for index, row in sweep.table.iterrows():
        ok = row["status"] == STATUS_OK
        cells = [str(run_number(index)), *(axis_value(row[axis]) for axis in sweep.axes)]
        if met is not None:
            verdict = "[green]pass[/green]" if met[index] else "[red]FAIL[/red]"
            cells.append(verdict if ok else f"[red]{row['status']}[/red]")
        for column in (metric, *(c for c, _ in COLUMNS)):
            value = py_value(row.get(column)) if ok else None
            cells.append("—" if value is None else FORMATS[column](float(value)))
        table.add_row(*cells)
    return table
