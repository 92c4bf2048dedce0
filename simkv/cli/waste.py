"""``simkv waste``: KV waste of a trace, paged vs contiguous reservations."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from simkv.analysis.waste_params import WasteParams
from simkv.cli.common import ForceOption, input_errors, int_list

if TYPE_CHECKING:
    from simkv.analysis.waste_study import WasteStudy

_DEFAULTS = WasteParams()  # frozen: the single source of option defaults


def _print_study(study: WasteStudy, paths: list[Path]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if study.excluded_requests:
        console.print(
            f"excluded {study.excluded_requests:,} of {study.requests:,} sequences longer "
            f"than max context {study.params.max_context_len}"
        )
    for block in study.to_table_rows():
        table = Table(*block.columns, title=block.title)
        for row in block.rows:
            table.add_row(*row)
        console.print(table)
    for path in paths:
        console.print(f"wrote {path}")


def waste(
    ctx: typer.Context,
    trace: Annotated[Path, typer.Argument(help="Trace: Azure, ShareGPT, Mooncake or lengths.")],
    block_sizes: Annotated[
        str, typer.Option(help="Paged block sizes, comma-separated.")
    ] = ",".join(str(size) for size in _DEFAULTS.block_sizes),
    max_context: Annotated[
        int, typer.Option(help="Max context length; longer sequences are excluded (tokens).")
    ] = _DEFAULTS.max_context_len,
    pool_slots: Annotated[
        int, typer.Option(help="KV pool of the replay (slots).")
    ] = _DEFAULTS.pool_slots,
    replay_requests: Annotated[
        int, typer.Option(help="Replay the first N requests.")
    ] = _DEFAULTS.replay_requests,
    column: Annotated[str | None, typer.Option(help="Length column of a plain trace.")] = None,
    out: Annotated[
        Path | None, typer.Option(help="Output directory [default: reports/waste-STEM]")
    ] = None,
    force: ForceOption = False,
) -> None:
    """KV waste of a trace: paged vs contiguous reservations (static snapshot + pool replay)."""
    # the study and matplotlib are imported only by the command that uses them (a quick --help)
    from simkv.analysis.waste_study import make_params, run_waste_study
    from simkv.outputs import Kind, new_output
    from simkv.report.waste_figures import write_waste_figures
    from simkv.workload.traces import read_lengths

    with input_errors(ctx):
        params = make_params(
            block_sizes=int_list(block_sizes, "--block-sizes"),
            max_context_len=max_context,
            pool_slots=pool_slots,
            replay_requests=replay_requests,
        )
        study = run_waste_study(read_lengths(trace, column=column), params)
        out_dir = out or Path("reports") / f"waste-{trace.stem}"
        with new_output(out_dir, Kind.WASTE, force=force) as staging:
            work = staging.path
            paths = study.write_csv(work) + write_waste_figures(study, work)
    _print_study(study, [out_dir / path.relative_to(work) for path in paths])
