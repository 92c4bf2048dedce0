"""Step times from published per-phase measurements: a DistServe profile or a Splitwise table.

``cost_model: {kind: table, path: profiler-a100-80g.vllm.json}`` (or the Splitwise CSV) prices
each step with the measurements of the run's model (``model:`` in the cost config names it in
the file, else the run's model preset through its aliases) at the run's tensor-parallel degree.
The data stand for their own GPU: the config's ``gpu`` prices swaps and copies only.

Neither source measured mixed steps, so a step is priced as its prefill part plus its decode
part minus one step's fixed cost (the smaller of the two parts' times for one token, which both
parts include):

* **DistServe** (its ``time_estimator.py`` formulas, :class:`DistServeFit`): prefill
  ``a + b·prefill tokens + c·Σ n²`` with ``Σ n² = 2·attention pairs − prefill tokens`` (exact for
  prompts from scratch; a chunk after cached context adds its cross term), decode
  ``a + b·context + c·sequences`` with ``context = kv_read_tokens``;
* **Splitwise**: prefill piecewise-linear in the step's prefill tokens through the prompt rows
  (batch × prompt tokens → ms, clamped-linear outside); decode separable: the batch-1 time at
  the step's mean context (through the batch-1 rows) plus the growth with batch measured at the
  table's reference prompt (the prompt size whose rows vary the batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from simkv.config.cost import TableCostConfig
from simkv.config.hardware import GpuSpec, ModelSpec
from simkv.engine.step_work import BlockTransfers, Work, empty_step
from simkv.engine.table_cost import clamped_linear
from simkv.errors import InputError
from simkv.measured.step_sources import DistServeFit, SplitwiseRow, read_distserve, read_splitwise

__all__ = ["PhaseCostModel", "phase_cost_model"]


def _points(pairs: Sequence[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Sorted x values with the mean y of each."""
    by_x: dict[float, list[float]] = {}
    for x, y in pairs:
        by_x.setdefault(x, []).append(y)
    xs = sorted(by_x)
    return xs, [sum(by_x[x]) / len(by_x[x]) for x in xs]


class _SplitwisePhases:
    """Prefill and decode times interpolated from one (model, tp) slice of a Splitwise table."""

    def __init__(self, rows: list[SplitwiseRow]) -> None:
        self._prefill = _points([(r.batch * r.prompt_tokens, r.prompt_ms) for r in rows])
        single = [r for r in rows if r.batch == 1]
        self._by_context = _points([(r.prompt_tokens + r.generated_tokens / 2, r.token_ms)
                                    for r in single])  # fmt: skip
        batched = {r.prompt_tokens for r in rows if r.batch > 1}
        ref = min(batched) if batched else min(r.prompt_tokens for r in rows)
        self._by_batch = _points([(r.batch, r.token_ms) for r in rows if r.prompt_tokens == ref])

    def prefill_ms(self, tokens: float, squares: float) -> float:
        return clamped_linear(*self._prefill, tokens)

    def decode_ms(self, batch: int, context_tokens: float) -> float:
        at_context = clamped_linear(*self._by_context, context_tokens / batch)
        growth = clamped_linear(*self._by_batch, batch) - clamped_linear(*self._by_batch, 1)
        return at_context + growth


Phases = DistServeFit | _SplitwisePhases


class PhaseCostModel(BlockTransfers):
    """Steps priced by per-phase measurements (see the module docstring)."""

    __slots__ = ("_fixed_ms", "_phases")

    def __init__(self, cfg: TableCostConfig, model: ModelSpec, gpu: GpuSpec, *,
                 tensor_parallel: int, block_size: int, phases: Phases) -> None:  # fmt: skip
        super().__init__(cfg, model, gpu, tensor_parallel=tensor_parallel, block_size=block_size)
        self._phases = phases
        self._fixed_ms = min(phases.prefill_ms(1, 1), phases.decode_ms(1, 1))

    def step_time_s(self, work: Work) -> float:
        prefill, decode = work.prefill_tokens, work.decode_tokens
        if prefill + decode <= 0:
            raise empty_step(work)
        ms = 0.0
        if prefill:
            ms += self._phases.prefill_ms(prefill, 2 * work.attention_pairs - prefill)
        if decode:
            ms += self._phases.decode_ms(decode, work.kv_read_tokens)
        if prefill and decode:
            ms -= self._fixed_ms
        return ms * 1e-3


def _available(tps: set[int]) -> str:
    return ", ".join(str(tp) for tp in sorted(tps)) or "none"


def _entries(path: Path, kind: str, name: str) -> dict[int, Phases]:
    """The file's per-phase data of model ``name``, by tensor-parallel degree."""
    if kind == "distserve":
        return {fit.tensor_parallel: fit for fit in read_distserve(path, name)}
    rows = read_splitwise(path, name)
    tps = sorted({r.tensor_parallel for r in rows})
    return {tp: _SplitwisePhases([r for r in rows if r.tensor_parallel == tp]) for tp in tps}


def phase_cost_model(
    cfg: TableCostConfig, path: Path, kind: str, model: ModelSpec, gpu: GpuSpec, *,
    tensor_parallel: int, block_size: int,
) -> PhaseCostModel:  # fmt: skip
    """The model for ``path`` (a ``kind`` of ``"distserve"`` or ``"splitwise"``) at the run's
    model and tp; :class:`InputError` when the file has no such entry."""
    name = cfg.model or model.name
    entries = _entries(path, kind, name)
    if tensor_parallel not in entries:
        there = ", ".join(str(tp) for tp in sorted(entries)) or "none"
        message = f"no data for model {name!r} at tp {tensor_parallel} (tp degrees: {there})"
        raise InputError(message, file=path, field="cost_model.model")
    return PhaseCostModel(cfg, model, gpu, tensor_parallel=tensor_parallel,
                          block_size=block_size, phases=entries[tensor_parallel])  # fmt: skip
