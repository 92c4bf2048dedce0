"""Read any supported measurement, detecting its format.

Formats, tried in this order:

1. a folder with ``requests.jsonl`` and ``meta.json`` (or that ``requests.jsonl`` itself):
   an LLMServingSim-style vLLM run (:mod:`simkv.measured.llmservingsim`);
2. a ``.json`` file, or one of another suffix that holds one JSON object (see
   ``_is_bench_file``): a ``vllm bench serve --save-result --save-detailed`` result
   (:mod:`simkv.measured.vllm_bench`);
3. any other file: the generic CSV/JSONL with ``arrival_s, prompt_tokens, output_tokens,
   ttft_s, e2el_s`` (:mod:`simkv.measured.generic`).

A file that fits none of them is an InputError saying what was expected.
"""

from __future__ import annotations

from pathlib import Path

from simkv.errors import InputError
from simkv.measured import llmservingsim, vllm_bench
from simkv.measured.generic import read_generic
from simkv.measured.runs import EngineSettings, MeasuredRun
from simkv.text import MAX_LINE_BYTES, parse_json


def _run_folder(path: Path) -> Path | None:
    """The run folder ``path`` names (the folder or its ``requests.jsonl``), if it is one."""
    if llmservingsim.is_run_folder(path):
        return path
    if path.name == llmservingsim.REQUESTS and llmservingsim.is_run_folder(path.parent):
        return path.parent
    return None


def _is_bench_file(path: Path) -> bool:
    """Whether the file is one JSON object for the bench reader rather than a generic table.

    ``.json`` files are; ``.csv``/``.jsonl`` files are not; otherwise a text that opens with
    ``{`` is one object when its first line is not a whole object (pretty-printed JSON) or
    when it is a single line that looks like a bench result (a one-line JSONL is a table).
    """
    suffix = path.suffix.lower()
    if suffix in (".csv", ".jsonl"):
        return False
    if suffix == ".json":
        return True
    try:
        with path.open("rb") as handle:  # a peek: a table may be far larger than a line
            peek = handle.read(MAX_LINE_BYTES + 1)
            more = bool(handle.read(1))
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", file=path) from None
    text = peek.decode("utf-8", errors="replace").removeprefix("\ufeff").lstrip()
    first, newline, rest = text.partition("\n")
    if not text.startswith("{"):
        return False
    if not first.strip().endswith("}"):
        return True
    if (newline and rest.strip()) or more:
        return False
    try:
        return vllm_bench.is_bench_result(parse_json(first, path))
    except InputError:
        return False


def _exists(path: Path) -> None:
    if not path.exists():
        raise InputError("no such file or folder", file=path)
    if path.is_dir() and _run_folder(path) is None:
        raise InputError(
            f"unknown measurement format: a folder without {llmservingsim.REQUESTS} and "
            f"{llmservingsim.META}", file=path,
        )  # fmt: skip


def check_single_engine(path: str | Path, settings: EngineSettings | None) -> None:
    """Refuse, as an :class:`InputError` at the recording field, a measurement served by more
    than one engine side by side (``settings.data_parallel`` > 1): a replay runs one engine,
    and simkv models neither data-parallel load balancing nor expert parallelism. Called where
    a replay takes the run's engine settings; with ``engine_settings: false`` the run is only
    a request stream for an engine the config describes, and is not refused."""
    engines = settings.data_parallel if settings else None
    if engines is None or engines <= 1:
        return
    experts = ", with expert parallelism" if settings and settings.expert_parallel else ""
    message = (f"the run was served by {engines} data-parallel engines{experts}; simkv replays "
               "a single engine and models neither data nor expert parallelism")  # fmt: skip
    folder = _run_folder(Path(path))
    if folder is None:
        raise InputError(message, file=path, field="data_parallel")
    meta = llmservingsim.read_meta(folder)
    raise meta.fail(message, *llmservingsim.data_parallel_keys(meta))


def read_measured_run(path: str | Path) -> MeasuredRun:
    """Read a measurement in any supported format (see the module docstring).

    Raises :class:`simkv.errors.InputError` (one line: file, line, field) for a missing or
    unreadable path, an unknown format, missing fields, non-numeric values, clock skew (first
    token before arrival, last token before first), zero-output requests, and empty files.
    """
    path = Path(path)
    _exists(path)
    folder = _run_folder(path)
    if folder is not None:
        return llmservingsim.read_run_folder(folder)
    if _is_bench_file(path):
        return vllm_bench.read_bench_result(path)
    return read_generic(path)


def read_engine_settings(path: str | Path) -> EngineSettings | None:
    """The engine settings of a measurement, reading no more than needed (None: not recorded).

    A run folder's come from its ``meta.json`` alone; a bench result's from its ``model_id``
    and ``--metadata`` entries; the generic format records none.
    """
    path = Path(path)
    _exists(path)
    folder = _run_folder(path)
    if folder is not None:
        return llmservingsim.engine_settings(llmservingsim.read_meta(folder))
    if _is_bench_file(path):
        return vllm_bench.bench_engine_settings(vllm_bench.read_bench_json(path))
    return None
