"""What a step-level fit saw: the range of its steps, and the knobs it extrapolates.

A fitted knob is a price per unit of something a step does; the fit sees it only over the
range of that something its steps span, and the profile then prices every step, inside that
range or not. ``simkv calibrate`` prints two lines beside the held-out error
(:mod:`simkv.calibrate.trust`):

* **data range** (:func:`data_range`): per phase (decode, mixed, prefill: ``StepSample.phase``)
  the number of steps and the range of batch size (sequences a step), tokens a step and
  context per sequence (KV read a step / its sequences) they span, on the axes of
  :func:`simkv.calibrate.trust.axis_values` (the residual pattern's);
* **extrapolation** (:func:`extrapolation`), when a fitted knob whose term grows with an axis
  is poorly identified by the data (the terms:
  :meth:`simkv.engine.cost_model.RooflineCostModel.host_s` and ``attention_s``):

  - ``seq_overhead_ms`` is paid once per sequence of every step (``num_seqs · seq``): poorly
    identified when no step batches :data:`MIN_BATCH_SEEN` sequences;
  - ``prefill_overhead_ms`` is paid once per prefilling sequence of a step with prefill tokens
    (``(num_seqs − decode_tokens) · prefill``): poorly identified when no step prefills two
    sequences (:data:`MIN_PREFILLS_SEEN`);
  - ``kv_read_efficiency`` divides the KV read's bytes (``kv_read_tokens``, the batch's
    contexts summed): poorly identified when the KV read is under :data:`MIN_KV_SHARE` of
    every step's predicted time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from simkv.calibrate.fit import PHYSICAL, step_models
from simkv.calibrate.steps import StepSample
from simkv.calibrate.trust import PATTERN_SPREAD, Trust, axis_values
from simkv.config.cost import RooflineCostConfig

PHASES = ("decode", "mixed", "prefill")
"""The phases of ``StepSample.phase``, in the order the data range names them."""
MIN_BATCH_SEEN = 16
"""Fewest sequences the largest step of a fit must batch for ``seq_overhead_ms`` to count as
seen. The per-sequence host cost need not be linear in the batch: a fit on the steps of vLLM
0.32 on this machine's CPU at 2 req/s (``traces/measured/cpu-vllm0.32/small-llama-chat-r2-2``,
batches of 1-9; device ``cpu-epyc-zen4-1t``) prices that engine's decode steps at 4 req/s
(``…-r4-2``, batches up to its ``max_num_seqs`` of 32) within 1 % up to 8 sequences, 16 % short
at 9-16, 30 % at 17-24 and 44 % at 25-32: the cost grows past about 8 sequences, so a fit must
see at least twice that. One engine's
measurement: a rule of thumb, not a law."""
MIN_PREFILLS_SEEN = 2
"""Fewest sequences one step must prefill for ``prefill_overhead_ms`` to count as seen: with at
most one prefilling sequence a step, its price per prefilling sequence cannot be told from a
price per step with a prefill (the two coincide on every step the fit saw)."""
MIN_KV_SHARE = PATTERN_SPREAD / (
    PHYSICAL["kv_read_efficiency"][1] / PHYSICAL["kv_read_efficiency"][0] - 1
)
"""Least share of some step's predicted time the KV read must reach for ``kv_read_efficiency``
to count as seen (≈ 5.8 %): moving the efficiency across its whole physical range (0.5-0.93,
:data:`simkv.calibrate.fit.PHYSICAL`) changes a KV read of share ``s`` by ``s · (0.93/0.5 − 1)``,
which stays under the 5 % a residual trend must reach to count
(:data:`simkv.calibrate.trust.PATTERN_SPREAD`) when ``s`` is below this."""


def _span(values: np.ndarray, unit: str) -> str:
    """``low–high unit`` (one figure when they round alike), thousands separated."""
    low, high = f"{values.min():,.0f}", f"{values.max():,.0f}"
    return f"{low} {unit}" if low == high else f"{low}–{high} {unit}"


def data_range(samples: Sequence[StepSample]) -> str:
    """The data range line: per phase present, its steps and the span of its batch size, its
    tokens a step (not for decode steps: one token a sequence, i.e. the batch) and its
    context per sequence (when some step of it reads the KV cache)."""
    seqs, context, tokens, _ = axis_values(samples)
    phases = np.array([s.phase for s in samples])
    parts = []
    for phase in (p for p in PHASES if p in set(phases.tolist())):
        rows = phases == phase
        batch = "sequence" if seqs[rows].max() == 1 else "sequences"
        count = int(rows.sum())
        said = [f"{phase} {count:,} step{'s' if count > 1 else ''}",
                f"batch {_span(seqs[rows], batch)}"]  # fmt: skip
        if phase != "decode":
            said.append(_span(tokens[rows], "tokens a step"))
        if context[rows].max() > 0:
            said.append(f"context {_span(context[rows], 'tokens/seq')}")
        parts.append(", ".join(said))
    return "data range: " + "; ".join(parts)


def prefills_per_step(samples: Sequence[StepSample]) -> np.ndarray:
    """Each step's prefilling sequences: ``num_seqs − decode_tokens`` in a step with prefill
    tokens, else 0 (the count ``prefill_overhead_ms`` multiplies in ``host_s``)."""
    return np.array(
        [s.work.num_seqs - s.work.decode_tokens if s.work.prefill_tokens else 0 for s in samples]
    )


def kv_shares(cfg: RooflineCostConfig, samples: Sequence[StepSample]) -> np.ndarray:
    """Each step's KV read (its ``attention_s`` less that of the same step reading no KV) as a
    share of its predicted time at ``cfg``."""
    shares = np.empty(len(samples))
    for i, (model, s) in enumerate(zip(step_models(cfg, samples), samples, strict=True)):
        blind = dataclasses.replace(s.work, kv_read_tokens=0, prefill_kv_tokens=0)
        kv_s = model.attention_s(s.work) - model.attention_s(blind)
        shares[i] = kv_s / model.step_time_s(s.work)
    return shares


def _clauses(
    cfg: RooflineCostConfig, samples: Sequence[StepSample], knobs: Sequence[str]
) -> list[str]:
    """One clause per poorly identified fitted knob (the module docstring's rules)."""
    out = []
    if "seq_overhead_ms" in knobs:
        batch = max(s.work.num_seqs for s in samples)
        if batch < MIN_BATCH_SEEN:
            out.append(
                f"the largest batch seen is {batch} sequences, so seq_overhead_ms "
                f"({cfg.seq_overhead_ms:.2g} ms) is extrapolated to larger batches — "
                "calibrate on a run whose batches reach the engine's max_num_seqs"
            )
    if "prefill_overhead_ms" in knobs and prefills_per_step(samples).max() < MIN_PREFILLS_SEEN:
        out.append(
            f"no step prefills {MIN_PREFILLS_SEEN} sequences, so prefill_overhead_ms "
            f"({cfg.prefill_overhead_ms:.2g} ms) is extrapolated to steps that do"
        )
    if "kv_read_efficiency" in knobs:
        share = float(kv_shares(cfg, samples).max())
        if share < MIN_KV_SHARE:
            context = _span(axis_values(samples)[1], "tokens/seq")
            out.append(
                f"the KV read is at most {share:.1%} of a step (contexts {context}), so "
                f"kv_read_efficiency ({cfg.kv_read_efficiency:.2g}) is extrapolated to "
                "steps reading more"
            )
    return out


def extrapolation(
    cfg: RooflineCostConfig, samples: Sequence[StepSample], knobs: Sequence[str]
) -> str | None:
    """The extrapolation line of a step fit of ``knobs`` ending at ``cfg``: each poorly
    identified knob's clause, or None when every one is seen."""
    clauses = _clauses(cfg, samples, knobs)
    return "extrapolation: " + "; ".join(clauses) if clauses else None


def covered(
    trust: Trust, cfg: RooflineCostConfig, samples: Sequence[StepSample], knobs: Sequence[str]
) -> Trust:
    """``trust`` (of a step fit of ``knobs`` ending at ``cfg``) with its data range and
    extrapolation lines."""
    return dataclasses.replace(
        trust, data_range=data_range(samples), extrapolation=extrapolation(cfg, samples, knobs)
    )
