"""The GPU options compared by ``simkv capacity --options``, as text: two tables of at most 80
columns (for option names up to 13 characters) and the answer sentence.

The first table is the answer of each option's search: replicas, GPUs, cost per hour, request
throughput and p99s; the second the planner's units at that answer
(:mod:`simkv.capacity.options`): cost per million output and total tokens, requests/s per GPU
and per unit of cost per hour, MFU, the busiest replica's busy share and the binding SLO's
margin. Every cost is written by :func:`simkv.report.conventions.money`, every cost header
names the currency (:func:`~simkv.report.conventions.money_unit`). The cheapest option and the
Pareto front are named under the tables.
"""

from __future__ import annotations

from simkv.capacity.options import OptionRow
from simkv.report.conventions import format_ms, money, money_unit
from simkv.report.options_report import percent

NAME_WIDTH = 13
"""The option column's width; longer names widen it (and the line)."""


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _line(name: str, cells: list[str], widths: tuple[int, ...], name_width: int) -> str:
    return f"{name:<{name_width}}" + "".join(
        f" {cell:>{width}}" for cell, width in zip(cells, widths, strict=True)
    )


def answer_table(rows: list[OptionRow]) -> list[str]:
    """Replicas, GPUs, cost per hour, req/s, p99 TTFT and TPOT per option (— without one)."""
    unit = money_unit(rows[0].currency) if rows else "$"
    width = max([NAME_WIDTH, *(len(row.name) for row in rows)])
    widths = (8, 5, 10, 7, 9, 9)
    lines = [_line("option", ["replicas", "GPUs", f"{unit}/h", "req/s", "p99 TTFT", "p99 TPOT"],
                   widths, width)]  # fmt: skip
    for row in rows:
        cells = ["—"] * 6 if row.replicas is None else [
            str(row.replicas), str(row.gpus), money(row.cost_per_hour, row.currency),
            _rate(row.request_throughput), format_ms(row.p99_ttft_ms),
            format_ms(row.p99_tpot_ms),
        ]  # fmt: skip
        lines.append(_line(row.name, cells, widths, width))
    return lines


def units_table(rows: list[OptionRow]) -> list[str]:
    """The planner's units at each option's answer (module docstring); none answered: []."""
    answered = [row for row in rows if row.replicas is not None]
    if not answered:
        return []
    unit = money_unit(rows[0].currency)
    width = max([NAME_WIDTH, *(len(row.name) for row in rows)])
    widths = (9, 9, 9, 11, 5, 7, 10)
    header = [f"{unit}/M out", f"{unit}/M all", "req/s/GPU", f"req/s/({unit}/h)", "MFU", "busiest",
              "headroom"]  # fmt: skip
    lines = [_line("at the answer", header, widths, width)]
    for row in answered:
        binding = row.binding_slo
        margin = dict(row.slo_margins).get(binding) if binding else None
        headroom = "—" if binding is None else f"{binding.upper()} {percent(margin)}"
        cells = [
            money(row.cost_per_m_output_tokens, row.currency),
            money(row.cost_per_m_total_tokens, row.currency),
            _rate(row.requests_per_gpu), _rate(row.requests_per_cost),
            percent(row.mfu_frac), percent(row.max_busy_frac), headroom,
        ]  # fmt: skip
        lines.append(_line(row.name, cells, widths, width))
    return lines


def marks_line(rows: list[OptionRow], best: OptionRow | None, front: list[bool]) -> str | None:
    """``Pareto front (cost, req/s, p99 TTFT, p99 TPOT): a, b``; None when nothing is on it."""
    names = [row.name for row, on in zip(rows, front, strict=True) if on]
    if best is None or not names:
        return None
    return "Pareto front (cost, req/s, p99 TTFT, p99 TPOT): " + ", ".join(names)


def cheapest_sentence(best: OptionRow, at_rate: float) -> str:
    """``cheapest at 8 req/s: h100-tp1, 1 replica × TP1 = 1 GPU, $3.50/h``."""
    replicas = f"{best.replicas} replica" + ("" if best.replicas == 1 else "s")
    gpus = f"{best.gpus} GPU" + ("" if best.gpus == 1 else "s")
    return (
        f"cheapest at {at_rate:g} req/s: {best.name}, {replicas} × "
        f"TP{best.tensor_parallel} = {gpus}, {money(best.cost_per_hour, best.currency)}/h"
    )


def units_line(row: OptionRow) -> str:
    """The planner's units of a search without prices, at its answer (the binding SLO's margin
    has its own line): ``at the answer: 4.62 req/s per GPU, MFU 25 %, busiest replica 98 %
    busy``."""
    return (
        f"at the answer: {_rate(row.requests_per_gpu)} req/s per GPU, MFU "
        f"{percent(row.mfu_frac)}, busiest replica {percent(row.max_busy_frac)} busy"
    )
