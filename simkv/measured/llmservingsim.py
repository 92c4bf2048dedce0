"""Reader of an LLMServingSim-style vLLM run folder (``bench/`` of casys-kaist/LLMServingSim).

A folder holds ``requests.jsonl`` and ``meta.json``, optionally ``timeseries.csv``:

* ``requests.jsonl``: one object per request with ``request_id`` (``bench-i``), ``input_toks``,
  ``output_toks`` and the engine's timestamps on one monotonic clock (s): ``queued_ts``,
  ``scheduled_ts``, ``first_token_ts``, ``last_token_ts``. As the source project's validator:
  arrival = ``queued_ts``, TTFT = first_token − queued, E2E = last_token − queued,
  first scheduling = ``scheduled_ts``.
* ``meta.json``: engine arguments (``engine_kwargs``), optionally ``kv_cache``, ``hardware`` and
  the resolved vLLM config (``resolved_config``), which wins over the arguments when both say;
  ``dataset_path`` names the request stream.
* ``timeseries.csv``: per tick, ``t, prompt_throughput, gen_throughput, running, waiting,
  kv_cache_pct`` (percent; an all-zero column means not logged and reads as NaN).

Prompt token ids come from the request stream (a JSONL with ``input_toks``, ``output_toks``,
``input_tok_ids`` per line), found by the basename of ``dataset_path`` in the folder or its
parent; request ``bench-i`` is the stream's i-th request line, and both its lengths must agree
with ``requests.jsonl``. Without the stream the run has no token ids (and a note says so).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd

from simkv.config.limits import MAX_TOKENS
from simkv.errors import InputError
from simkv.measured.jsondoc import JsonDoc, read_json
from simkv.measured.runs import EngineSettings, MeasuredRun, RequestColumns, request_frame
from simkv.tables import Table, read_table

REQUESTS, META, TIMESERIES = "requests.jsonl", "meta.json", "timeseries.csv"
_RC = "resolved_config"
#: Where each engine setting is looked up in meta.json, first found wins.
_SOURCES: dict[str, tuple[tuple[str, ...], ...]] = {
    "model": ((_RC, "model_config", "model"), ("engine_kwargs", "model"), ("model",)),
    "gpu": (("hardware", "device_name"),),
    "tensor_parallel": ((_RC, "parallel_config", "tensor_parallel_size"),
                        ("engine_kwargs", "tensor_parallel_size")),
    "data_parallel": ((_RC, "parallel_config", "data_parallel_size"),
                      ("engine_kwargs", "data_parallel_size")),
    "expert_parallel": ((_RC, "parallel_config", "enable_expert_parallel"),
                        ("engine_kwargs", "enable_expert_parallel")),
    "max_num_seqs": ((_RC, "scheduler_config", "max_num_seqs"), ("engine_kwargs", "max_num_seqs")),
    "max_num_batched_tokens": ((_RC, "scheduler_config", "max_num_batched_tokens"),
                               ("engine_kwargs", "max_num_batched_tokens")),
    "max_model_len": ((_RC, "model_config", "max_model_len"), ("engine_kwargs", "max_model_len")),
    "block_size": ((_RC, "cache_config", "block_size"), ("kv_cache", "block_size")),
    "num_gpu_blocks": ((_RC, "cache_config", "num_gpu_blocks"), ("kv_cache", "num_gpu_blocks")),
    "enable_prefix_caching": ((_RC, "cache_config", "enable_prefix_caching"),
                              ("kv_cache", "enable_prefix_caching")),
    "enable_chunked_prefill": ((_RC, "scheduler_config", "enable_chunked_prefill"),
                               ("engine_kwargs", "enable_chunked_prefill")),
    "reserve_full_prompt": ((_RC, "scheduler_config", "scheduler_reserve_full_isl"),
                            ("engine_kwargs", "scheduler_reserve_full_isl")),
    "dtype": (("engine_kwargs", "dtype"), (_RC, "model_config", "dtype")),
    "kv_cache_dtype": (("engine_kwargs", "kv_cache_dtype"), (_RC, "cache_config", "cache_dtype")),
}  # fmt: skip


def is_run_folder(path: Path) -> bool:
    """Whether ``path`` is a folder with ``requests.jsonl`` and ``meta.json``."""
    return path.is_dir() and (path / REQUESTS).is_file() and (path / META).is_file()


def read_meta(folder: Path) -> JsonDoc:
    """``meta.json`` of a run folder (a JSON object)."""
    meta = read_json(folder / META)
    if not isinstance(meta.data, dict):
        raise InputError("expected a JSON object", file=meta.path, line=1)
    return meta


def _lookup(data: object, keys: tuple[str, ...]) -> object:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _typed(meta: JsonDoc, keys: tuple[str, ...], value: object, kind: type) -> object:
    """``value`` checked against ``kind`` (ints ≥ 1); ``torch.bfloat16`` becomes ``bfloat16``."""
    if kind is int and (type(value) is not int or value < 1):
        raise meta.fail(f"expected an integer ≥ 1, got {value!r}", *keys)
    if kind is not int and not isinstance(value, kind):
        raise meta.fail(f"expected a {kind.__name__}, got {value!r}", *keys)
    return value.removeprefix("torch.") if isinstance(value, str) else value


def _recorded(meta: JsonDoc, name: str) -> tuple[tuple[str, ...], object] | None:
    """The first of ``_SOURCES[name]`` that ``meta.json`` records: (key path, value)."""
    for keys in _SOURCES[name]:
        value = _lookup(meta.data, keys)
        if value is not None:
            return keys, value
    return None


def engine_settings(meta: JsonDoc) -> EngineSettings:
    """The engine settings ``meta.json`` records (see ``_SOURCES``); a wrong type is an error."""
    values: dict[str, object] = {}
    types = EngineSettings.field_types()
    for name in _SOURCES:
        found = _recorded(meta, name)
        if found is not None:
            values[name] = _typed(meta, *found, types[name])
    version = meta.data.get("vllm_version")
    if version is not None:
        values["engine_version"] = f"vllm {_typed(meta, ('vllm_version',), version, str)}"
    return EngineSettings(**values)  # type: ignore[arg-type]


def data_parallel_keys(meta: JsonDoc) -> tuple[str, ...]:
    """The key path ``meta.json`` records the data-parallel size under."""
    found = _recorded(meta, "data_parallel")
    return found[0] if found else _SOURCES["data_parallel"][-1]


def _columns(table: Table) -> RequestColumns:
    def clock(name: str) -> np.ndarray:
        return table.numbers(name, minimum=-np.inf, integer=False)

    queued = clock("queued_ts")
    names = {"arrival_s": "queued_ts", "prompt_tokens": "input_toks",
             "output_tokens": "output_toks", "ttft_s": "first_token_ts",
             "e2el_s": "last_token_ts", "first_scheduled_s": "scheduled_ts"}  # fmt: skip
    return RequestColumns(
        table.path, table.lines, names, queued,
        table.ints("input_toks", minimum=0, maximum=MAX_TOKENS),
        table.ints("output_toks", minimum=0, maximum=MAX_TOKENS),
        clock("first_token_ts") - queued, clock("last_token_ts") - queued, clock("scheduled_ts"),
    )  # fmt: skip


def _stream_path(folder: Path, meta: JsonDoc) -> Path | None:
    dataset = meta.data.get("dataset_path")
    if not isinstance(dataset, str) or not dataset:
        return None
    name = PurePosixPath(dataset.replace("\\", "/")).name
    return next((p for p in (folder / name, folder.parent / name) if p.is_file()), None)


def _stream_rows(requests: Table) -> np.ndarray:
    """Stream row (0-based request line) of each request, from ``request_id`` ``bench-i``."""
    rows = np.empty(len(requests.frame), np.int64)
    for row, rid in enumerate(requests.column("request_id").tolist()):
        found = re.fullmatch(r"bench-(\d+)", str(rid))
        if found is None:
            raise requests.fail(row, "request_id", f"expected bench-<i>, got {rid!r}")
        rows[row] = int(found.group(1))
    return rows


def _token_ids(stream: Table, row: int) -> np.ndarray:
    ids = np.asarray(stream.frame["input_tok_ids"].iloc[row])
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or (len(ids) and ids.min() < 0):
        raise stream.fail(row, "input_tok_ids", "expected a list of token ids (integers ≥ 0)")
    return ids.astype(np.int64)


def prompt_token_ids(requests: Table, stream_path: Path) -> list[np.ndarray]:
    """Prompt token ids of each request (file order), checked against the request stream."""
    stream = read_table(stream_path)
    stream.column("input_tok_ids")
    rows = _stream_rows(requests)
    lengths = {name: requests.ints(name, 0, maximum=MAX_TOKENS)
               for name in ("input_toks", "output_toks")}  # fmt: skip
    streamed = {name: stream.ints(name, 0, maximum=MAX_TOKENS) for name in lengths}
    out = []
    for row, i in enumerate(rows.tolist()):
        if i >= len(stream.frame):
            message = f"bench-{i} has no line in {stream_path.name} ({len(stream.frame)} requests)"
            raise requests.fail(row, "request_id", message)
        for name, values in lengths.items():
            if streamed[name][i] != values[row]:
                where = f"{requests.path.name}:{requests.lines[row]}"
                message = f"{streamed[name][i]} tokens, but bench-{i} ({where}) has {values[row]}"
                raise stream.fail(i, name, message)
        ids = _token_ids(stream, i)
        if len(ids) != lengths["input_toks"][row]:
            message = f"{len(ids)} token ids for input_toks {lengths['input_toks'][row]}"
            raise stream.fail(i, "input_tok_ids", message)
        out.append(ids)
    return out


def read_timeseries(path: Path) -> pd.DataFrame:
    """``timeseries.csv`` in :class:`MeasuredRun`'s columns (KV usage as a 0–1 fraction)."""
    table = read_table(path)
    kv = table.numbers("kv_cache_pct", minimum=0, integer=False) / 100.0
    return pd.DataFrame(
        {
            "t_s": table.numbers("t", minimum=-np.inf, integer=False),
            "running": table.ints("running", minimum=0, maximum=MAX_TOKENS),
            "waiting": table.ints("waiting", minimum=0, maximum=MAX_TOKENS),
            "kv_usage": np.full(len(kv), np.nan) if not kv.any() else kv,
            "prompt_throughput": table.numbers("prompt_throughput", minimum=0, integer=False),
            "gen_throughput": table.numbers("gen_throughput", minimum=0, integer=False),
        }
    )


def read_run_folder(folder: Path) -> MeasuredRun:
    """Read an LLMServingSim-style run folder (see the module docstring)."""
    meta = read_meta(folder)
    table = read_table(folder / REQUESTS)
    frame, order = request_frame(_columns(table))
    notes: list[str] = []
    ids = None
    stream = _stream_path(folder, meta)
    if stream is not None:
        in_file_order = prompt_token_ids(table, stream)
        ids = tuple(in_file_order[row] for row in order)
    elif meta.data.get("dataset_path"):
        notes.append(f"request stream {meta.data['dataset_path']} not found: no prompt token ids")
    series = read_timeseries(folder / TIMESERIES) if (folder / TIMESERIES).is_file() else None
    if series is not None and series["kv_usage"].isna().all():
        notes.append("timeseries kv_cache_pct is 0 throughout: KV usage not logged (NaN)")
    return MeasuredRun(
        folder, folder.name, frame, ids, engine_settings(meta), series, notes=tuple(notes)
    )
