"""Step-level measurements: measured (or fitted) step times of a serving engine, read into
:class:`StepSample` rows that the calibration fits the roofline's knobs to.

Three formats, detected from the file:

* **DistServe profile** (JSON: model → tensor-parallel degree → ``prefill``/``decoding_*``
  coefficients, in ms, as ``simdistserve/estimators/time_estimator.py`` uses them). The file
  holds a fitted model, not raw steps, so it is *sampled*: prefill batches of 1–8 prompts of
  64–2,048 tokens (``a + b·tokens + c·Σ prompt²``) and decode batches of 1–256 sequences at
  contexts of 64–2,048 tokens (``a + b·context tokens + c·batch``, the small- or large-batch
  coefficients by the file's threshold). Its GPU is not in the file: the caller names it.
* **Splitwise performance model** (CSV with ``model, hardware, prompt_size, batch_size,
  token_size, prompt_time, token_time, tensor_parallel``): a prompt row is a prefill step of
  ``batch_size`` prompts of ``prompt_size`` tokens; ``token_time`` is the mean decode step of
  ``batch_size`` sequences while they generate ``token_size`` tokens, so their mean context is
  ``prompt_size + token_size / 2``. Repeated rows are averaged. The llama2-70b TP2 rows at
  prompt 512 and batch 64 (0.8 s against 6.6 s at batch 32, half the tokens) are dropped as the
  dataset's README advises.
* **Generic step CSV**: ``step_time_ms, prefill_tokens, decode_tokens, num_seqs,
  kv_read_tokens`` and optionally ``attention_pairs`` (default: each prefill sequence's chunk
  from scratch is unknown, so 0 — give it when prefill chunks are long) and
  ``tensor_parallel`` (default 1); model and GPU are named by the caller.

Every problem is an :class:`~simkv.errors.InputError` naming the file, line and field.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from simkv.engine.cost_model import StepWork, chunk_attention_pairs
from simkv.errors import InputError
from simkv.presets import find_preset

__all__ = ["StepSample", "read_step_samples"]


@dataclass(frozen=True, slots=True)
class StepSample:
    """One measured step: what it computed, on which model/GPU/tp, and how long it took."""

    work: StepWork
    model: str
    gpu: str
    tensor_parallel: int
    time_ms: float
    phase: str  # "prefill", "decode" or "mixed": for the per-phase residual report


_PREFILL_BATCHES = (1, 2, 4, 8)
_PREFILL_LENS = (64, 128, 256, 512, 1024, 2048)
_DECODE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 96, 128, 192, 256)
_DECODE_CONTEXTS = (64, 256, 512, 1024, 2048)


def prefill_work(batch: int, prompt_tokens: int) -> StepWork:
    """A prefill step of ``batch`` prompts of ``prompt_tokens`` tokens each, from scratch."""
    return StepWork(
        prefill_tokens=batch * prompt_tokens,
        decode_tokens=0,
        attention_pairs=batch * chunk_attention_pairs(prompt_tokens, 0),
        kv_read_tokens=0,
        num_seqs=batch,
    )


def decode_work(batch: int, context_tokens: float) -> StepWork:
    """A decode step of ``batch`` sequences, each after ``context_tokens`` cached tokens."""
    return StepWork(
        prefill_tokens=0,
        decode_tokens=batch,
        attention_pairs=0,
        kv_read_tokens=round(batch * (context_tokens + 1)),
        num_seqs=batch,
    )


def _model_preset(name: str, path: Path, line: int | None, field: str) -> str:
    preset = find_preset("models", name)
    if preset is None:
        raise InputError(
            f"no model preset matches {name!r} (add aliases or a preset)",
            file=path,
            line=line,
            field=field,
        )
    return preset


def _gpu_preset(name: str | None, path: Path, line: int | None, field: str) -> str:
    if name is None:
        raise InputError("the file does not name its GPU: pass --gpu", file=path, field=field)
    preset = find_preset("gpus", name)
    if preset is None:
        raise InputError(f"no GPU preset matches {name!r}", file=path, line=line, field=field)
    return preset


def _coefficients(value: object, path: Path, field: str) -> tuple[float, float, float]:
    ok = isinstance(value, list) and len(value) == 3
    if ok and all(isinstance(v, int | float) and math.isfinite(v) for v in value):  # type: ignore[union-attr]
        a, b, c = value  # type: ignore[misc]
        return float(a), float(b), float(c)
    raise InputError("expected a list of three finite numbers", file=path, field=field)


def _read_distserve(path: Path, data: dict, gpu: str | None, only: str | None) -> list[StepSample]:
    gpu_name = _gpu_preset(gpu, path, None, "gpu")
    samples: list[StepSample] = []
    for model_name, by_tp in data.items():
        if not _wanted(model_name, only):
            continue
        model = _model_preset(model_name, path, None, model_name)
        if not isinstance(by_tp, dict):
            raise InputError("expected a mapping of tp degrees", file=path, field=model_name)
        for tp_text, coeffs in by_tp.items():
            where = f"{model_name}.{tp_text}"
            if not tp_text.isdigit() or int(tp_text) < 1 or not isinstance(coeffs, dict):
                raise InputError(
                    "expected a tp degree ≥ 1 mapped to coefficients", file=path, field=where
                )
            tp = int(tp_text)
            pa, pb, pc = _coefficients(coeffs.get("prefill"), path, f"{where}.prefill")
            small = _coefficients(coeffs.get("decoding_smallbs"), path, f"{where}.decoding_smallbs")
            large = _coefficients(coeffs.get("decoding_largebs"), path, f"{where}.decoding_largebs")
            threshold = coeffs.get("decoding_large_small_bs_threshold")
            if not isinstance(threshold, int):
                raise InputError(
                    "expected an integer",
                    file=path,
                    field=f"{where}.decoding_large_small_bs_threshold",
                )
            for batch in _PREFILL_BATCHES:
                for n in _PREFILL_LENS:
                    ms = pa + pb * batch * n + pc * batch * n * n
                    samples.append(
                        StepSample(prefill_work(batch, n), model, gpu_name, tp, ms, "prefill")
                    )
            for batch in _DECODE_BATCHES:
                da, db, dc = small if batch < threshold else large
                for ctx in _DECODE_CONTEXTS:
                    ms = da + db * batch * ctx + dc * batch
                    samples.append(
                        StepSample(decode_work(batch, ctx), model, gpu_name, tp, ms, "decode")
                    )
    return samples


_SPLITWISE = (
    "model",
    "hardware",
    "prompt_size",
    "batch_size",
    "token_size",
    "prompt_time",
    "token_time",
    "tensor_parallel",
)
_GENERIC = ("step_time_ms", "prefill_tokens", "decode_tokens", "num_seqs", "kv_read_tokens")
_GENERIC_OPTIONAL = ("attention_pairs", "tensor_parallel")


def _number(row: dict[str, str], key: str, path: Path, line: int, *, positive: bool) -> float:
    text = (row.get(key) or "").strip()
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        want = "a positive number" if positive else "a non-negative number"
        raise InputError(f"expected {want}, got {text!r}", file=path, line=line, field=key)
    return value


def _integer(row: dict[str, str], key: str, path: Path, line: int, *, positive: bool) -> int:
    value = _number(row, key, path, line, positive=positive)
    if value != int(value) or value > 2**40:
        raise InputError(f"expected an integer, got {row[key]!r}", file=path, line=line, field=key)
    return int(value)


def _rows(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            names = reader.fieldnames or []
            for name in required:
                if name not in names:
                    raise InputError("missing column", file=path, line=1, field=name)
            rows = [
                (reader.line_num, row)
                for row in reader
                if any((v or "").strip() for v in row.values())
            ]
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text ({err.reason})", file=path) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", file=path) from None
    if not rows:
        raise InputError("no data rows", file=path, line=1)
    return rows


def _is_splitwise_outlier(model: str, tp: int, prompt: int, batch: int) -> bool:
    return model == "llama2-70b" and tp == 2 and prompt == 512 and batch == 64


def _wanted(name: str, only: str | None) -> bool:
    """Whether rows of model ``name`` are kept when the caller asks for model ``only``."""
    return only is None or find_preset("models", name) == find_preset("models", only)


def _read_splitwise(path: Path, only: str | None) -> list[StepSample]:
    groups: dict[tuple[str, str, int, int, int, int], list[tuple[float, float]]] = defaultdict(list)
    for line, row in _rows(path, _SPLITWISE):
        if not _wanted(row["model"].strip(), only):
            continue
        model = _model_preset(row["model"].strip(), path, line, "model")
        gpu = _gpu_preset(row["hardware"].strip(), path, line, "hardware")
        tp = _integer(row, "tensor_parallel", path, line, positive=True)
        prompt = _integer(row, "prompt_size", path, line, positive=True)
        batch = _integer(row, "batch_size", path, line, positive=True)
        tokens = _integer(row, "token_size", path, line, positive=True)
        if _is_splitwise_outlier(row["model"].strip(), tp, prompt, batch):
            continue
        times = (
            _number(row, "prompt_time", path, line, positive=True),
            _number(row, "token_time", path, line, positive=True),
        )
        groups[(model, gpu, tp, prompt, batch, tokens)].append(times)
    prompt_steps: dict[tuple[str, str, int, int, int], list[float]] = defaultdict(list)
    samples: list[StepSample] = []
    for (model, gpu, tp, prompt, batch, tokens), times in sorted(groups.items()):
        prompt_steps[(model, gpu, tp, prompt, batch)] += [p for p, _ in times]
        token_ms = sum(t for _, t in times) / len(times)
        work = decode_work(batch, prompt + tokens / 2)
        samples.append(StepSample(work, model, gpu, tp, token_ms, "decode"))
    for (model, gpu, tp, prompt, batch), times in sorted(prompt_steps.items()):
        ms = sum(times) / len(times)
        samples.append(StepSample(prefill_work(batch, prompt), model, gpu, tp, ms, "prefill"))
    return samples


def _read_generic(path: Path, model: str | None, gpu: str | None) -> list[StepSample]:
    if model is None:
        raise InputError(
            "a generic step table does not name its model: pass --model", file=path, field="model"
        )
    model_name = _model_preset(model, path, None, "model")
    gpu_name = _gpu_preset(gpu, path, None, "gpu")
    samples = []
    for line, row in _rows(path, _GENERIC):
        ints = {
            key: _integer(row, key, path, line, positive=False)
            for key in (*_GENERIC[1:], "attention_pairs")
            if key in row
        }
        ints.setdefault("attention_pairs", 0)
        tp = (
            _integer(row, "tensor_parallel", path, line, positive=True)
            if (row.get("tensor_parallel") or "").strip()
            else 1
        )
        if ints["prefill_tokens"] + ints["decode_tokens"] == 0:
            raise InputError(
                "a step computes at least one token", file=path, line=line, field="prefill_tokens"
            )
        if ints["num_seqs"] < ints["decode_tokens"] or ints["num_seqs"] == 0:
            raise InputError(
                "num_seqs must be ≥ decode_tokens and ≥ 1", file=path, line=line, field="num_seqs"
            )
        work = StepWork(**ints)
        phase = (
            "mixed"
            if work.prefill_tokens and work.decode_tokens
            else ("prefill" if work.prefill_tokens else "decode")
        )
        ms = _number(row, "step_time_ms", path, line, positive=True)
        samples.append(StepSample(work, model_name, gpu_name, tp, ms, phase))
    return samples


def _csv_header(path: Path) -> list[str]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            return [name.strip() for name in next(csv.reader(handle), [])]
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text ({err.reason})", file=path) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", file=path) from None


def is_step_table(path: Path) -> bool:
    """Whether ``path`` looks like one of the step-level formats (by suffix and header)."""
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return False
        return isinstance(data, dict) and any(
            isinstance(v, dict) and any(isinstance(c, dict) and "prefill" in c for c in v.values())
            for v in data.values()
        )
    if path.suffix.lower() != ".csv" or not path.is_file():
        return False
    header = _csv_header(path)
    return "step_time_ms" in header or "token_time" in header


def read_step_samples(
    path: Path,
    *,
    model: str | None = None,
    gpu: str | None = None,
) -> list[StepSample]:
    """Every step sample of the file at ``path`` (format detected; see the module docstring).

    ``model``/``gpu`` name the preset (or an alias) for formats that do not carry them; a
    DistServe profile needs ``gpu``, a generic table both.
    """
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as err:
            raise InputError(f"cannot read: {err.strerror}", file=path) from None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
            raise InputError(f"not a JSON document ({err})", file=path) from None
        if not isinstance(data, dict) or not data:
            raise InputError("expected a DistServe profile (model → tp → coefficients)", file=path)
        samples = _read_distserve(path, data, gpu, model)
    else:
        header = _csv_header(path)
        if "token_time" in header:
            samples = _read_splitwise(path, model)
        elif "step_time_ms" in header:
            samples = _read_generic(path, model, gpu)
        else:
            raise InputError(
                "not a step table: expected a DistServe JSON, a Splitwise CSV "
                "(token_time) or a generic CSV (step_time_ms)",
                file=path,
                line=1,
            )
    if not samples:
        raise InputError(f"no steps of model {model!r}", file=path, field="model")
    return samples
