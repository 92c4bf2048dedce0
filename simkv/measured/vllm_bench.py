"""Reader of ``vllm bench serve --save-result --save-detailed`` results (one JSON object).

The keys used (as vLLM's ``vllm/benchmarks/serve.py`` writes them; lists have one entry per
request, in the order the client issued them):

* ``input_lens``, ``output_lens`` (tokens), ``ttfts`` (s), ``itls`` (per request, the gaps in s
  between streamed chunks after the first), ``errors`` (empty string = success);
* ``latencies`` (s, send to last chunk) — E2E latency; older results lack it, and then it is
  ``ttft + sum(itls)``, the same quantity;
* ``start_times`` (s, ``time.perf_counter()`` when the request was sent) — the arrivals.
  Without them (older results) the per-request arrival times are unknown: vLLM drew its gaps at
  random and did not save them, so arrivals are evenly spaced at the result's ``request_rate``
  (``inf``: all at 0) and a note says so;
* ``model_id`` → ``EngineSettings.model``; ``--metadata KEY=VALUE`` entries whose key is an
  :class:`~simkv.measured.runs.EngineSettings` field (e.g. ``max_num_seqs=256``,
  ``gpu=NVIDIA H100 80GB HBM3``) fill that field.

TTFT and E2E latency are measured from the send (``start_times``), as vLLM's own metrics are;
with ``--max-concurrency`` the time a request waited in the client before being sent
(``queue_times``) is outside both, and the arrival replayed is the send. Failed requests (a
non-empty ``errors`` entry) are left out, with a note; a successful request that generated no
token is an error, as in every format.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from simkv.errors import InputError
from simkv.measured.jsondoc import JsonDoc, read_json
from simkv.measured.runs import EngineSettings, MeasuredRun, RequestColumns, request_frame

PER_REQUEST = ("input_lens", "output_lens", "ttfts", "itls")
_NAMES = {"arrival_s": "start_times", "prompt_tokens": "input_lens",
          "output_tokens": "output_lens", "ttft_s": "ttfts", "e2el_s": "latencies"}  # fmt: skip
_APPEND_HINT = " (a file written with --append-result holds one result per line: split it)"


def is_bench_result(data: object) -> bool:
    """Whether ``data`` looks like a ``vllm bench serve`` result (detailed or not)."""
    return isinstance(data, dict) and ("ttfts" in data or "mean_ttft_ms" in data)


def read_bench_json(path: Path) -> JsonDoc:
    """The result file, checked to be a detailed ``vllm bench serve`` result."""
    doc = read_json(path, hint=_APPEND_HINT)
    if not is_bench_result(doc.data):
        raise InputError(
            "unknown measurement format: a JSON file that is not a vllm bench serve result "
            "(no ttfts / mean_ttft_ms key)", file=path, line=1,
        )  # fmt: skip
    missing = [key for key in PER_REQUEST if key not in doc.data]
    if missing:
        raise doc.fail(
            f"no per-request data ({', '.join(missing)} missing): save the result with "
            "vllm bench serve --save-result --save-detailed", missing[0],
        )  # fmt: skip
    return doc


def _numbers(doc: JsonDoc, key: str, n: int, *, integer: bool = False) -> np.ndarray:
    """List ``key`` of ``n`` finite real numbers (float64; integral if ``integer``); errors name
    ``key[i]``."""
    values = doc.data[key]
    if not isinstance(values, list) or len(values) != n:
        count = len(values) if isinstance(values, list) else "no list"
        raise doc.fail(f"expected a list of {n} values (one per request), got {count}", key)
    for i, value in enumerate(values):
        bad = type(value) not in (int, float) or not math.isfinite(value)
        if bad or (integer and value != int(value)):
            kind = "an integer" if integer else "a finite number"
            raise InputError(f"not {kind}: {value!r}", file=doc.path,
                             line=doc.line_of(key), field=f"{key}[{i}]")  # fmt: skip
    return np.asarray(values, dtype=np.float64)


def _itls(doc: JsonDoc, n: int) -> list[np.ndarray]:
    itls = doc.data["itls"]
    if not isinstance(itls, list) or len(itls) != n:
        raise doc.fail(f"expected a list of {n} lists (one per request)", "itls")
    out = []
    for i, gaps in enumerate(itls):
        ok = isinstance(gaps, list) and all(type(g) in (int, float) and g >= 0 for g in gaps)
        if not ok:
            raise InputError("expected a list of inter-token gaps ≥ 0 s", file=doc.path,
                             line=doc.line_of("itls"), field=f"itls[{i}]")  # fmt: skip
        out.append(np.asarray(gaps, dtype=np.float64))
    return out


def _arrivals(doc: JsonDoc, n: int, notes: list[str]) -> np.ndarray:
    if "start_times" in doc.data:
        return _numbers(doc, "start_times", n)
    rate = doc.data.get("request_rate")
    if rate == "inf" or (type(rate) in (int, float) and math.isinf(rate)):
        notes.append("no start_times: all arrivals at 0 (request_rate inf)")
        return np.zeros(n)
    if type(rate) not in (int, float) or not rate > 0:
        raise doc.fail("no start_times and no usable request_rate for the arrivals", "request_rate")
    notes.append(f"no start_times: arrivals evenly spaced at request_rate {rate:g}/s")
    return np.arange(n, dtype=np.float64) / float(rate)


def _metadata_value(raw: Any, kind: type) -> object:
    """A ``--metadata`` string (or JSON value) as ``kind``; None when it does not parse."""
    text = str(raw).strip()
    if kind is bool:
        return {"true": True, "false": False}.get(text.lower())
    if kind is int:
        return int(text) if text.isdigit() and int(text) >= 1 else None
    return text or None


def bench_engine_settings(doc: JsonDoc) -> EngineSettings:
    """``model_id`` and the ``--metadata`` entries named like an EngineSettings field."""
    values: dict[str, object] = {}
    for name, kind in EngineSettings.field_types().items():
        if name in doc.data and doc.data[name] is not None:
            value = _metadata_value(doc.data[name], kind)
            if value is None:
                raise doc.fail(f"expected a {kind.__name__}, got {doc.data[name]!r}", name)
            values[name] = value
    if "model" not in values and isinstance(doc.data.get("model_id"), str):
        values["model"] = doc.data["model_id"]
    return EngineSettings(**values)  # type: ignore[arg-type]


def _successful(doc: JsonDoc, n: int, notes: list[str]) -> np.ndarray:
    errors = doc.data.get("errors")
    if not isinstance(errors, list) or len(errors) != n:
        return np.ones(n, dtype=bool)
    ok = np.array([not err for err in errors], dtype=bool)
    if not ok.any():
        raise doc.fail("every request failed (non-empty errors)", "errors")
    if not ok.all():
        notes.append(f"{int((~ok).sum())} failed requests (non-empty errors) left out")
    return ok


def read_bench_result(path: Path) -> MeasuredRun:
    """Read a detailed ``vllm bench serve`` result (see the module docstring)."""
    doc = read_bench_json(path)
    n = len(doc.data["input_lens"]) if isinstance(doc.data["input_lens"], list) else 0
    if n == 0:
        raise doc.fail("empty measurement: no requests", "input_lens")
    notes: list[str] = []
    ok = _successful(doc, n, notes)
    itls = _itls(doc, n)
    ttft = _numbers(doc, "ttfts", n)
    if "latencies" in doc.data:
        e2el = _numbers(doc, "latencies", n)
    else:
        e2el = ttft + np.array([gaps.sum() for gaps in itls])
        notes.append("no latencies: E2E latency = ttft + sum(itls)")
    cols = RequestColumns(
        path, np.ones(int(ok.sum()), np.int64), _NAMES,
        _arrivals(doc, n, notes)[ok], _numbers(doc, "input_lens", n, integer=True)[ok],
        _numbers(doc, "output_lens", n, integer=True)[ok], ttft[ok], e2el[ok],
        list_index=np.flatnonzero(ok),
    )  # fmt: skip
    try:
        frame, order = request_frame(cols)
    except InputError as err:  # locate the list the bad value is in
        line = doc.line_of((err.field or "").partition("[")[0])
        raise InputError(err.message, file=path, line=line, field=err.field) from None
    kept = np.flatnonzero(ok)
    return MeasuredRun(
        path, path.stem, frame, engine=bench_engine_settings(doc),
        itl_s=tuple(itls[kept[row]] for row in order), notes=tuple(notes),
    )  # fmt: skip
