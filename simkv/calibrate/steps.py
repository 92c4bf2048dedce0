"""Step-level measurements as :class:`StepSample` rows that the calibration fits to.

Sources, detected from the file (:func:`simkv.measured.step_sources.sniff`):

* a **DistServe profile** (a fitted model, :mod:`simkv.measured.step_sources`): *sampled* on a
  grid: prefill batches of 1–8 prompts of 64–2,048 tokens and decode batches of 1–256
  sequences at contexts of 64–2,048 tokens, only where the decode batch's KV fits in the GPU
  memory the weights leave (:func:`decode_fits`: the profile was measured on a running
  engine, so a batch that cannot fit was never measured; there the coefficients only
  extrapolate, e.g. OPT-66B at TP 2 holds ~9,000 tokens, not 256 × 2,048); its GPU is named
  by the caller;
* a **Splitwise table**: each averaged point is a prefill step (``batch`` prompts from scratch)
  and a decode step (``batch`` sequences at the mean context ``prompt + generated / 2``);
* a **generic step CSV**: ``step_time_ms, prefill_tokens, decode_tokens, num_seqs,
  kv_read_tokens`` and optionally ``attention_pairs`` (default 0), ``prefill_kv_tokens``
  (the part of ``kv_read_tokens`` its prefill chunks read, default 0) and ``tensor_parallel``
  (default 1); model and GPU named by the caller.

Every problem is an :class:`~simkv.errors.InputError` naming the file, line and field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simkv.config.hardware import load_gpu_preset, load_model_preset
from simkv.config.sections import KVCacheConfig
from simkv.engine.capacity import InsufficientMemory, kv_capacity_blocks
from simkv.engine.step_work import StepWork, chunk_attention_pairs
from simkv.errors import InputError
from simkv.measured.step_sources import (
    gpu_preset,
    integer,
    model_preset,
    number,
    read_distserve,
    read_splitwise,
    rows,
    sniff,
)

__all__ = [
    "StepSample",
    "decode_fits",
    "decode_work",
    "is_step_table",
    "prefill_work",
    "read_step_samples",
]


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


def decode_fits(model: str, gpu: str, tensor_parallel: int, kv_tokens: float) -> bool:
    """Whether ``kv_tokens`` tokens of KV fit on each GPU of the tp group beside its weight
    shard, as simkv sizes a KV pool (:func:`~simkv.engine.capacity.kv_capacity_blocks` with
    the :class:`KVCacheConfig` defaults: vLLM's 0.9 utilization, 1 GiB activation reserve)."""
    kv = KVCacheConfig()
    try:
        capacity = kv_capacity_blocks(
            load_model_preset(model), load_gpu_preset(gpu), tensor_parallel=tensor_parallel,
            block_size=1, gpu_memory_utilization=kv.gpu_memory_utilization,
            activation_reserve_bytes=int(kv.activation_reserve_gib * 2**30),
        )  # fmt: skip
    except InsufficientMemory:
        return False
    return kv_tokens <= capacity


_GENERIC = ("step_time_ms", "prefill_tokens", "decode_tokens", "num_seqs", "kv_read_tokens")


def _distserve_samples(path: Path, gpu: str | None, only: str | None) -> list[StepSample]:
    gpu_name = gpu_preset(gpu, path, None, "gpu")
    samples: list[StepSample] = []
    for fit in read_distserve(path, only):
        tp = fit.tensor_parallel
        for batch in _PREFILL_BATCHES:
            for n in _PREFILL_LENS:
                ms = fit.prefill_ms(batch * n, batch * n * n)
                samples.append(StepSample(prefill_work(batch, n), fit.model, gpu_name, tp, ms,
                                          "prefill"))  # fmt: skip
        for batch in _DECODE_BATCHES:
            for ctx in _DECODE_CONTEXTS:
                if not decode_fits(fit.model, gpu_name, tp, batch * (ctx + 1)):
                    continue
                ms = fit.decode_ms(batch, batch * ctx)
                samples.append(StepSample(decode_work(batch, ctx), fit.model, gpu_name, tp, ms,
                                          "decode"))  # fmt: skip
    return samples


def _splitwise_samples(path: Path, only: str | None) -> list[StepSample]:
    points = read_splitwise(path, only)
    samples = [
        StepSample(decode_work(p.batch, p.prompt_tokens + p.generated_tokens / 2), p.model, p.gpu,
                   p.tensor_parallel, p.token_ms, "decode")
        for p in points
    ]  # fmt: skip
    prompts: dict[tuple[str, str, int, int, int], list[float]] = {}
    for p in points:  # the prompt step does not depend on the tokens generated after it
        key = (p.model, p.gpu, p.tensor_parallel, p.prompt_tokens, p.batch)
        prompts.setdefault(key, []).append(p.prompt_ms)
    for (model, gpu, tp, prompt, batch), times in sorted(prompts.items()):
        ms = sum(times) / len(times)
        samples.append(StepSample(prefill_work(batch, prompt), model, gpu, tp, ms, "prefill"))
    return samples


def _read_generic(path: Path, model: str | None, gpu: str | None) -> list[StepSample]:
    if model is None:
        raise InputError(
            "a generic step table does not name its model: pass --model", file=path, field="model"
        )
    model_name = model_preset(model, path, None, "model")
    gpu_name = gpu_preset(gpu, path, None, "gpu")
    samples = []
    for line, row in rows(path, _GENERIC):
        ints = {
            key: integer(row, key, path, line, positive=False)
            for key in (*_GENERIC[1:], "attention_pairs", "prefill_kv_tokens")
            if (row.get(key) or "").strip() or key in _GENERIC
        }
        ints.setdefault("attention_pairs", 0)
        ints.setdefault("prefill_kv_tokens", 0)
        if ints["prefill_kv_tokens"] > ints["kv_read_tokens"]:
            raise InputError("prefill_kv_tokens exceeds kv_read_tokens (it is the part of them "
                             "the prefill chunks read)", file=path, line=line,
                             field="prefill_kv_tokens")  # fmt: skip
        tp = (
            integer(row, "tensor_parallel", path, line, positive=True)
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
        ms = number(row, "step_time_ms", path, line, positive=True)
        samples.append(StepSample(work, model_name, gpu_name, tp, ms, phase))
    return samples


def is_step_table(path: Path) -> bool:
    """Whether ``path`` holds one of the step-level formats (by its content)."""
    return path.is_file() and sniff(path) in ("distserve", "splitwise", "steps")


def read_step_samples(
    path: Path, *, model: str | None = None, gpu: str | None = None
) -> list[StepSample]:
    """Every step sample of the file at ``path`` (format detected; see the module docstring).

    ``model``/``gpu`` name the preset (or an alias) for formats that do not carry them; a
    DistServe profile needs ``gpu``, a generic table both; ``model`` also keeps only that
    model's steps of a file holding several.
    """
    kind = sniff(path) if path.is_file() else None
    if kind == "distserve":
        samples = _distserve_samples(path, gpu, model)
    elif kind == "splitwise":
        samples = _splitwise_samples(path, model)
    elif kind == "steps":
        samples = _read_generic(path, model, gpu)
    elif not path.exists():
        raise InputError("no such file or folder", file=path)
    else:
        raise InputError("not a step table: expected a DistServe JSON, a Splitwise CSV "
                         "(token_time) or a generic CSV (step_time_ms, prefill_tokens, ...)",
                         file=path, line=1)  # fmt: skip
    if not samples:
        raise InputError(f"no steps of model {model!r}", file=path, field="model")
    return samples
