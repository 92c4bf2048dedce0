"""Published step-time data of real engines, read and checked into typed records.

Two shapes, both bundled under ``traces/measured/``:

* **DistServe profile** (JSON: model → tensor-parallel degree → coefficients in ms, as
  DistServe's ``simdistserve/estimators/time_estimator.py`` uses them): a prefill step of
  prompts ``n_i`` takes ``a + b·Σ n_i + c·Σ n_i²``; a decode step of ``B`` sequences with
  ``C`` context tokens in all takes ``a + b·C + c·B``, with the ``decoding_smallbs``
  coefficients below ``decoding_large_small_bs_threshold`` sequences and ``decoding_largebs``
  from it on. It is a fitted model; the GPU is not in the file.
* **Splitwise performance table** (CSV: ``model, hardware, prompt_size, batch_size,
  token_size, prompt_time, token_time, tensor_parallel``, ms): ``prompt_time`` is a prefill
  step of ``batch_size`` prompts of ``prompt_size`` tokens, ``token_time`` the mean decode step
  of ``batch_size`` sequences while they generate ``token_size`` tokens (mean context
  ``prompt_size + token_size / 2``). Repeated rows are averaged; the llama2-70b TP 2 rows at
  prompt 512 and batch 64 (0.8 s against 6.6 s at batch 32, half the tokens) are dropped, as the
  dataset's README advises.

Model and GPU names are mapped onto simkv's presets through their ``aliases``
(:func:`simkv.presets.find_preset`). Every problem is an :class:`InputError` with the file,
line and field. :mod:`simkv.calibrate.steps` samples these records for fitting;
:mod:`simkv.engine.phase_cost` prices steps with them directly (``cost_model: {kind: table}``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

from simkv.errors import InputError
from simkv.presets import find_preset
from simkv.text import read_csv, read_json_file

__all__ = [
    "Coefficients",
    "DistServeFit",
    "SplitwiseRow",
    "find_model",
    "gpu_preset",
    "model_preset",
    "read_distserve",
    "read_splitwise",
    "sniff",
]

Coefficients = tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class DistServeFit:
    """One (model, tp) entry of a DistServe profile; every coefficient in ms."""

    model: str
    tensor_parallel: int
    prefill: Coefficients
    decode_small: Coefficients
    decode_large: Coefficients
    threshold: int

    def prefill_ms(self, tokens: float, squares: float) -> float:
        a, b, c = self.prefill
        return a + b * tokens + c * squares

    def decode_ms(self, batch: int, context_tokens: float) -> float:
        a, b, c = self.decode_small if batch < self.threshold else self.decode_large
        return a + b * context_tokens + c * batch


@dataclass(frozen=True, slots=True)
class SplitwiseRow:
    """One (model, gpu, tp, prompt, batch, tokens) point of a Splitwise table, repeats
    averaged; times in ms."""

    model: str
    gpu: str
    tensor_parallel: int
    prompt_tokens: int
    batch: int
    generated_tokens: int
    prompt_ms: float
    token_ms: float


def model_preset(name: str, path: Path, line: int | None, field: str) -> str:
    """The model preset matching ``name``; :class:`InputError` if none does."""
    preset = find_preset("models", name)
    if preset is None:
        raise InputError(f"no model preset matches {name!r} (add aliases or a preset)",
                         file=path, line=line, field=field)  # fmt: skip
    return preset


def gpu_preset(name: str | None, path: Path, line: int | None, field: str) -> str:
    """The GPU preset matching ``name``; :class:`InputError` if none does or it is None."""
    if name is None:
        raise InputError("the file does not name its GPU: pass --gpu", file=path, field=field)
    preset = find_preset("gpus", name)
    if preset is None:
        raise InputError(f"no GPU preset matches {name!r}", file=path, line=line, field=field)
    return preset


def find_model(name: str, only: str | None) -> bool:
    """Whether entries of model ``name`` are kept when the caller asks for model ``only``."""
    return only is None or find_preset("models", name) == find_preset("models", only)


def _coefficients(value: object, path: Path, field: str) -> Coefficients:
    numbers = (
        isinstance(value, list)
        and len(value) == 3
        and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in value
        )
    )
    if numbers:
        return float(value[0]), float(value[1]), float(value[2])  # type: ignore[index]
    raise InputError("expected a list of three finite numbers", file=path, field=field)


def _load_json(path: Path) -> Any:
    return read_json_file(path)[0]


def _fit(path: Path, model: str, tp_text: str, coeffs: object, where: str) -> DistServeFit:
    if not tp_text.isdigit() or int(tp_text) < 1 or not isinstance(coeffs, dict):
        raise InputError("expected a tp degree ≥ 1 mapped to coefficients", file=path,
                         field=where)  # fmt: skip
    threshold = coeffs.get("decoding_large_small_bs_threshold")
    if not isinstance(threshold, int) or isinstance(threshold, bool):
        raise InputError("expected an integer", file=path,
                         field=f"{where}.decoding_large_small_bs_threshold")  # fmt: skip
    return DistServeFit(
        model, int(tp_text),
        _coefficients(coeffs.get("prefill"), path, f"{where}.prefill"),
        _coefficients(coeffs.get("decoding_smallbs"), path, f"{where}.decoding_smallbs"),
        _coefficients(coeffs.get("decoding_largebs"), path, f"{where}.decoding_largebs"),
        threshold,
    )  # fmt: skip


def read_distserve(path: Path, only: str | None = None) -> list[DistServeFit]:
    """Every (model, tp) fit of a DistServe profile, or only those of model ``only``."""
    data = _load_json(path)
    if not isinstance(data, dict) or not data:
        raise InputError("expected a DistServe profile (model → tp → coefficients)", file=path)
    fits = []
    for model_name, by_tp in data.items():
        if not find_model(model_name, only):
            continue
        model = model_preset(model_name, path, None, model_name)
        if not isinstance(by_tp, dict):
            raise InputError("expected a mapping of tp degrees", file=path, field=model_name)
        for tp_text, coeffs in by_tp.items():
            fits.append(_fit(path, model, tp_text, coeffs, f"{model_name}.{tp_text}"))
    return fits


SPLITWISE_COLUMNS = ("model", "hardware", "prompt_size", "batch_size", "token_size",
                     "prompt_time", "token_time", "tensor_parallel")  # fmt: skip


def number(row: dict[str, str], key: str, path: Path, line: int, *, positive: bool) -> float:
    """A finite number ≥ 0 (> 0 if ``positive``) from a CSV row, else :class:`InputError`."""
    text = (row.get(key) or "").strip()
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        want = "a positive number" if positive else "a non-negative number"
        raise InputError(f"expected {want}, got {text!r}", file=path, line=line, field=key)
    return value


def integer(row: dict[str, str], key: str, path: Path, line: int, *, positive: bool) -> int:
    """An integer (≤ 2^40) from a CSV row, else :class:`InputError`."""
    value = number(row, key, path, line, positive=positive)
    if value != int(value) or value > 2**40:
        raise InputError(f"expected an integer, got {row[key]!r}", file=path, line=line, field=key)
    return int(value)


def rows(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """The non-blank data rows of a CSV file with their line numbers; every ``required``
    column present."""
    reader = read_csv(path)
    header = next(reader, (1, []))[1]
    for name in required:
        if name not in header:
            raise InputError("missing column", file=path, line=1, field=name)
    out = [(line, dict(zip_longest(header, row))) for line, row in reader
           if any(cell.strip() for cell in row)]  # fmt: skip
    if not out:
        raise InputError("no data rows", file=path, line=1)
    return out


def _is_outlier(model: str, tp: int, prompt: int, batch: int) -> bool:
    return model == "llama2-70b" and tp == 2 and prompt == 512 and batch == 64


def read_splitwise(path: Path, only: str | None = None) -> list[SplitwiseRow]:
    """The averaged points of a Splitwise table, or only those of model ``only``.

    Each distinct model and GPU name is matched to its preset once (a preset lookup parses
    every preset file: per row, a 420-row table took seconds)."""
    kept: dict[str, bool] = {}
    presets: dict[tuple[str, str], str] = {}

    def preset(kind: str, name: str, line: int) -> str:
        if (kind, name) not in presets:
            find = model_preset if kind == "model" else gpu_preset
            presets[kind, name] = find(name, path, line, "model" if kind == "model" else "hardware")
        return presets[kind, name]

    groups: dict[tuple[str, str, int, int, int, int], list[tuple[float, float]]] = defaultdict(list)
    for line, row in rows(path, SPLITWISE_COLUMNS):
        name = row["model"].strip()
        if name not in kept:
            kept[name] = find_model(name, only)
        if not kept[name]:
            continue
        key = (
            preset("model", name, line),
            preset("gpu", row["hardware"].strip(), line),
            *(integer(row, k, path, line, positive=True)
              for k in ("tensor_parallel", "prompt_size", "batch_size", "token_size")),
        )  # fmt: skip
        if _is_outlier(name, key[2], key[3], key[4]):
            continue
        groups[key].append((number(row, "prompt_time", path, line, positive=True),
                            number(row, "token_time", path, line, positive=True)))  # fmt: skip
    return [
        SplitwiseRow(*key, sum(p for p, _ in times) / len(times),
                     sum(t for _, t in times) / len(times))
        for key, times in sorted(groups.items())
    ]  # fmt: skip


def sniff(path: Path) -> str | None:
    """``"distserve"``, ``"splitwise"``, ``"steps"`` (simkv's generic step CSV) or ``"table"``
    (the table cost model's CSV) by the file's content, or None when it is none of them; a
    ``.json`` file that is not JSON (or too deep, :mod:`simkv.text`) is an :class:`InputError`."""
    if path.suffix.lower() == ".json":
        data = read_json_file(path)[0]  # a .json file that is not JSON: its located error
        ok = isinstance(data, dict) and any(
            isinstance(v, dict) and any(isinstance(c, dict) and "prefill" in c for c in v.values())
            for v in data.values()
        )
        return "distserve" if ok else None
    try:
        header = [name.strip() for name in next(read_csv(path), (1, []))[1]]
    except InputError:
        return None
    if "token_time" in header:
        return "splitwise"
    if "prefill_tokens" in header and "step_time_ms" in header:
        return "steps"
    return "table" if "num_tokens" in header else None
