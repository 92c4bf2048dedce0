"""Requests as they arrive: a workload row becomes a :class:`~simkv.engine.request.seq.Seq`.

vLLM's length handling at arrival (``max_model_len``: outputs truncated to fit, a prompt that
leaves no room for one output token rejected), the request's fan-out group (multi-sequence
requests) and its prefix-cache keys (with prefix caching on).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

from simkv.engine.request.fork_group import ForkGroup
from simkv.engine.request.seq import Seq, Status
from simkv.engine.scheduler import Scheduler
from simkv.errors import InputError
from simkv.kv.allocator import InvariantViolation
from simkv.workload.content import KeyStream, UniqueKeys
from simkv.workload.request import Workload


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """Model limits applied at arrival (vLLM's ``max_model_len`` handling), and whether
    requests carry content keys (prefix caching on)."""

    max_model_len: int
    block_size: int
    content_keys: bool = False


class Intake:
    """Builds each arriving request's :class:`Seq` from the workload's columns."""

    def __init__(self, workload: Workload, scheduler: Scheduler, limits: EngineLimits) -> None:
        self.limits = limits
        # typed arrays: 8 bytes a request, Python ints only when read
        self._prompt = array("q", workload.prompt_tokens.astype(np.int64).tobytes())
        self._output = array("q", workload.output_tokens.astype(np.int64).tobytes())
        self._priority = array("q", workload.priority.astype(np.int64).tobytes())
        self._content = workload.content
        self._sampling = _sampling_columns(workload, scheduler)

    def seq(self, i: int, arrival_s: float, now: float) -> Seq:
        """Request ``i``, arrived at ``arrival_s`` and admitted to the engine at ``now``; it
        comes back ``REJECTED`` (``prompt_too_long``) when its prompt leaves no room for one
        output token, as vLLM rejects it."""
        prompt, output = self._prompt[i], self._output[i]
        limits = self.limits
        max_len = limits.max_model_len
        truncated = prompt + output > max_len
        seq = Seq(
            i, arrival_s, prompt, min(output, max_len - prompt) if truncated else output,
            self._priority[i], limits.block_size, truncated,
        )  # fmt: skip
        if self._sampling is not None:
            seq.group = _group(self._sampling, i, seq.output_tokens)
        if prompt >= max_len:
            seq.output_tokens = output
            seq.status = Status.REJECTED
            seq.reason = "prompt_too_long"
            seq.finish_s = now
        elif limits.content_keys:
            content = self._content
            if content is None:
                seq.keys = UniqueKeys(i)
            else:
                segments, output_id = content.segments(i), int(content.output_ids[i])
                seq.keys = KeyStream(segments, output_id, limits.block_size)
        return seq


def _group(sampling: Sampling, i: int, output_tokens: int) -> ForkGroup | None:
    """Request ``i``'s fan-out; None when it has one sequence or never reaches its fork."""
    n_seqs, fork_after, beam = sampling
    if n_seqs[i] < 2 or fork_after[i] >= output_tokens:
        return None
    return ForkGroup(n_seqs[i], fork_after[i], beam[i])


Sampling = tuple[list[int], list[int], list[bool]]  # per request: n, fork_after, beam


def _sampling_columns(workload: Workload, scheduler: Scheduler) -> Sampling | None:
    """The workload's fan-out columns as lists, None when every request has one sequence.

    Raises :class:`InputError` when there are multi-sequence requests and the scheduler cannot
    run them (vLLM 0.11 fans ``n`` out into separate requests before its scheduler).
    """
    if workload.n_seqs is None or not (workload.n_seqs > 1).any():
        return None
    if not scheduler.supports_forks:
        raise InputError(
            "multi-sequence requests need scheduler vllm_v0 (vLLM 0.11 fans n out into "
            "separate requests)",
            field="workload.sampling",
        )
    fork_after, beam = workload.fork_after, workload.beam
    if fork_after is None or beam is None:
        raise InvariantViolation("a workload with n_seqs has fork_after and beam columns")
    return workload.n_seqs.tolist(), fork_after.tolist(), beam.tolist()
