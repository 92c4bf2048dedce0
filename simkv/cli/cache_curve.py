"""``simkv cache-curve``: prefix-cache hit rate against cache capacity, every capacity at once.

The prompts come from a trace with content (a Mooncake or Qwen-Bailian trace with ``hash_ids``)
or from the workload of a run config (``shared_prefix``, ``multi_turn``, ``agentic``, a trace
with content). The model,
KV dtype and block size come from ``--config`` (whose HBM pool is then marked) or from
``--model``/``--dtype``/``--block-size``; marks of other tiers are ``--mark NAME=SIZE``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from simkv.cli.common import ForceOption, input_errors
from simkv.errors import InputError

if TYPE_CHECKING:
    from simkv.config.hardware import ModelSpec
    from simkv.config.sim import SimConfig
    from simkv.workload.request import Workload

_CONFIG_SUFFIXES = (".yaml", ".yml")
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*(TiB|GiB|TB|GB|blocks)?\s*$")
_UNIT_BYTES = {"TiB": 2**40, "GiB": 2**30, "TB": 10**12, "GB": 10**9}


def _workload(path: Path) -> tuple[Workload, SimConfig | None]:
    """The requests of a trace file, or of a run config's workload (and that config)."""
    import numpy as np

    from simkv.run.load import load_config
    from simkv.workload.build import build_workload
    from simkv.workload.traces import read_trace

    if path.suffix.lower() in _CONFIG_SUFFIXES:
        cfg = load_config(path)
        return build_workload(cfg.workload, np.random.default_rng(cfg.seed), path.parent), cfg
    return read_trace(path), None


def _model(name: str | None, dtype: str | None) -> ModelSpec | None:
    """The named model preset, its KV dtype replaced by ``dtype`` when given."""
    from pydantic import ValidationError

    from simkv.config.hardware import ModelSpec

    if name is None:
        if dtype is not None:
            raise InputError(
                "--dtype needs --model (the model whose KV it stores)", field="--dtype"
            )
        return None
    try:
        return ModelSpec.model_validate({"preset": name, **({"kv_dtype": dtype} if dtype else {})})
    except ValidationError as err:
        first = err.errors()[0]
        field = "--dtype" if first["loc"] == ("kv_dtype",) else "--model"
        raise InputError(first["msg"].removeprefix("Value error, "), field=field) from None


def _mark(text: str, block_bytes: int | None) -> tuple[str, int]:
    """``NAME=SIZE`` as (name, blocks): SIZE in blocks (plain or ``blocks``), GiB, TiB, GB
    or TB (rounded down to whole blocks)."""
    name, _, size = text.partition("=")
    match = _SIZE.match(size)
    if not name.strip() or match is None:
        message = f"expected NAME=SIZE with SIZE like 64GiB, 500GB or 20000blocks, got {text!r}"
        raise InputError(message, field="--mark")
    value, unit = float(match.group(1)), match.group(2) or "blocks"
    if unit == "blocks":
        return name.strip(), int(value)
    if block_bytes is None:
        message = f"{text!r}: a size in {unit} needs --model or --config (bytes per block)"
        raise InputError(message, field="--mark")
    return name.strip(), int(value * _UNIT_BYTES[unit] // block_bytes)


def _config_marks(cfg: SimConfig, fleet: bool) -> list[tuple[str, int]]:
    """The usable KV blocks of one engine's config (of a fleet: one replica) and, below
    them, what each of its KV tiers adds (a tier holds blocks HBM evicted or never held: the
    capacities add up, HBM + CPU, then + disk)."""
    from simkv.run.sizing import kv_sizing, usable_blocks

    sizing = kv_sizing(cfg)
    total = usable_blocks(cfg, sizing)
    marks = [("HBM pool, one replica" if fleet else "HBM pool", total)]
    block_bytes = sizing.block_size * cfg.model.kv_bytes_per_token
    for tier in cfg.kv_cache.tiers:
        total += tier.blocks(block_bytes)
        marks.append((f"+ {tier.kind} tier", total))
    return marks


def cache_curve(
    ctx: typer.Context,
    trace: Annotated[
        Path, typer.Argument(help="Trace with prompt content (Mooncake hash_ids) or a run config.")
    ],
    model: Annotated[
        str | None, typer.Option(help="Model preset: the x axis in GiB (bytes per block).")
    ] = None,
    dtype: Annotated[
        str | None, typer.Option(help="KV-cache dtype (fp16, bf16, fp32, fp8) [default: model's]")
    ] = None,
    block_size: Annotated[
        int | None, typer.Option(help="Tokens per block [default: 16, vLLM's]")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="Run config: its model, dtype, block size; its HBM pool and KV tiers are marked."
        ),
    ] = None,
    mark: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME=SIZE", help="Mark a capacity, e.g. cpu=64GiB (repeatable)."),
    ] = None,
    with_outputs: Annotated[
        bool,
        typer.Option(
            "--with-outputs",
            help="Also cache generated tokens' full blocks, as vLLM caches decode blocks.",
        ),
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Output directory [default: reports/STEM-cache-curve]")
    ] = None,
    force: ForceOption = False,
) -> None:
    """Prefix-cache hit rate against cache capacity, from one pass over a trace (ideal LRU)."""
    from simkv.analysis.cache_curve import prefix_cache_curve
    from simkv.config.limits import MAX_TOKENS
    from simkv.config.sections import KVCacheConfig
    from simkv.outputs import Kind, new_output
    from simkv.report.cache_curve_report import CurveSetup, write_cache_curve
    from simkv.run.load import load_config

    with input_errors(ctx):
        if block_size is not None and not 1 <= block_size <= MAX_TOKENS:
            message = f"must be 1 to {MAX_TOKENS:,} tokens, got {block_size}"
            raise InputError(message, field="--block-size")
        workload, cfg = _workload(trace)
        if workload.content is None:
            message = (
                "the trace has no prompt content: cache-curve needs a Mooncake or Qwen-Bailian "
                "trace with hash_ids, or a config whose workload has content (shared_prefix, "
                "multi_turn, agentic)"
            )
            raise InputError(message, file=trace)
        if (config is not None or cfg is not None) and (model or dtype or block_size):
            message = (
                "the model, dtype and block size come from the config (--config, or TRACE when "
                "it is a config): give one or the other"
            )
            given = [name for name, v in (("--model", model), ("--dtype", dtype)) if v]
            field = "--config" if config is not None else (given or ["--block-size"])[0]
            raise InputError(message, field=field)
        cfg = load_config(config) if config is not None else cfg
        # a fleet's first replica group: its model, block size and pool
        engine = None if cfg is None else cfg.group_configs()[0]
        spec = engine.model if engine is not None else _model(model, dtype)
        default_size = KVCacheConfig.model_fields["block_size"].default
        size = engine.kv_cache.block_size if engine is not None else block_size or default_size
        block_bytes = None if spec is None else size * spec.kv_bytes_per_token
        marks = (
            [] if engine is None or cfg is None else _config_marks(engine, cfg.fleet is not None)
        )
        marks += [_mark(text, block_bytes) for text in mark or []]
        outputs = workload.output_tokens if with_outputs else None
        curve = prefix_cache_curve(workload.content, size, outputs)
        setup = CurveSetup(
            workload.source, None if spec is None else spec.name, block_bytes, tuple(marks)
        )
        out_dir = out or Path("reports") / f"{trace.stem}-cache-curve"
        with new_output(out_dir, Kind.CACHE_CURVE, force=force) as staging:
            paths = write_cache_curve(curve, setup, staging.path)
    at = [
        f"{name} ({blocks:,} blocks): {curve.at(blocks)['hit_rate']:.1%}" for name, blocks in marks
    ]
    typer.echo(
        f"{curve.requests:,} requests, {curve.block_accesses:,} full blocks; never evicting: "
        f"{curve.max_hit_rate:.1%} of prompt tokens hit"
    )
    for line in at:
        typer.echo(f"  {line}")
    for path in paths:
        typer.echo(f"wrote {out_dir / path.relative_to(staging.path)}")
