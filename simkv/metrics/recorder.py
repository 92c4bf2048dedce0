"""Append-only columnar recording during a run; DataFrames are built once, at the end.

Three tables come out of a run:

* ``requests`` — one row per request that left the system (finished, rejected or aborted);
  ``num_seqs`` is its sequence count (``n`` of a multi-sequence request, else 1) and
  ``generated_tokens`` counts the tokens of all its sequences.
* ``steps`` — one row per engine step (one batched forward pass); ``batch_size`` counts
  sequences, ``fork_blocks`` / ``fork_blocks_independent`` are the distinct blocks of forked
  multi-sequence requests and the blocks their sequences would hold unshared.
* ``itl`` — inter-token latencies as weighted samples ``(itl_s, count)``: every decoding
  request in a step whose previous token came at the end of the previous step shares one gap,
  so a step adds one row for all of them plus one row per request that had stalled. No
  per-token objects are ever created.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from simkv.engine.sequence import Seq

STEP_COLUMNS: tuple[str, ...] = (
    "time_s",
    "duration_s",
    "prefill_tokens",
    "decode_tokens",
    "batch_size",
    "num_waiting",
    "num_running",
    "num_swapped",
    "blocks_used",
    "blocks_free",
    "token_slots",
    "reserved_slots",
    "internal_frag_slots",
    "external_frag_slots",
    "free_slots",
    "cpu_blocks_used",
    "preempted",
    "swap_out_blocks",
    "swap_in_blocks",
    "copy_blocks",
    "cache_hit_tokens",
    "cached_blocks",
    "shared_slots",
    "evictions",
    "fork_blocks",
    "fork_blocks_independent",
)


@dataclass(frozen=True)
class RunFrames:
    """The frames of one run, in simkv's column names (vLLM benchmark names where one exists)."""

    requests: pd.DataFrame
    steps: pd.DataFrame
    itl: pd.DataFrame


class Recorder:
    """Collects per-request, per-step and inter-token-latency columns for one run."""

    def __init__(self) -> None:
        self._req: dict[str, list[object]] = {
            name: []
            for name in (
                "req_id", "arrival_s", "first_scheduled_s", "first_token_s", "finish_s",
                "prompt_tokens", "output_tokens", "generated_tokens", "num_seqs", "truncated",
                "priority",
                "preemptions", "swaps", "swapped_bytes", "recomputed_tokens", "prefix_hit_tokens",
                "cache_hit_tokens", "status", "reason",
            )
        }  # fmt: skip
        self._steps: list[tuple[float | int, ...]] = []
        self._itl_s: list[float] = []
        self._itl_count: list[int] = []

    def request_done(self, seq: Seq) -> None:
        """Record a request that finished, was rejected or was aborted."""
        r = self._req
        r["req_id"].append(seq.req_id)
        r["arrival_s"].append(seq.arrival_s)
        r["first_scheduled_s"].append(seq.first_scheduled_s)
        r["first_token_s"].append(seq.first_token_s)
        r["finish_s"].append(seq.finish_s)
        r["prompt_tokens"].append(seq.prompt_tokens)
        r["output_tokens"].append(seq.output_tokens)
        group = seq.group
        if group is None:
            r["generated_tokens"].append(seq.num_output)
            r["num_seqs"].append(1)
        else:
            r["generated_tokens"].append(group.generated_tokens(seq.num_output))
            r["num_seqs"].append(group.n)
        r["truncated"].append(seq.truncated)
        r["priority"].append(seq.priority)
        r["preemptions"].append(seq.preemptions)
        r["swaps"].append(seq.swaps)
        r["swapped_bytes"].append(seq.swapped_bytes)
        r["recomputed_tokens"].append(seq.recomputed_tokens)
        r["prefix_hit_tokens"].append(seq.prefix_hit_tokens or 0)
        r["cache_hit_tokens"].append(seq.cache_hit_tokens)
        r["status"].append(str(seq.status))
        r["reason"].append(seq.reason)

    def itl(self, gap_s: float, count: int = 1) -> None:
        """``count`` tokens each came ``gap_s`` after their request's previous token."""
        self._itl_s.append(gap_s)
        self._itl_count.append(count)

    def step(self, row: tuple[float | int, ...]) -> None:
        """One step's values, in :data:`STEP_COLUMNS` order."""
        self._steps.append(row)

    @property
    def done_ids(self) -> list[int]:
        """Ids of the requests recorded so far, in the order they left (read-only use)."""
        return self._req["req_id"]  # type: ignore[return-value]

    @property
    def num_done(self) -> int:
        """Requests recorded so far (finished, rejected or aborted)."""
        return len(self._req["req_id"])

    @property
    def num_steps(self) -> int:
        return len(self._steps)

    def frames(self) -> RunFrames:
        """Build the DataFrames (once, at the end of the run)."""
        requests = pd.DataFrame(self._req)
        for col in ("first_scheduled_s", "first_token_s", "finish_s"):
            requests[col] = requests[col].astype("float64")
        requests = requests.sort_values("req_id", kind="stable").reset_index(drop=True)
        if self._steps:
            steps = pd.DataFrame(np.array(self._steps, dtype=np.float64), columns=STEP_COLUMNS)
        else:
            steps = pd.DataFrame({c: pd.Series(dtype="float64") for c in STEP_COLUMNS})
        for col in STEP_COLUMNS[2:]:
            steps[col] = steps[col].astype("int64")
        itl = pd.DataFrame(
            {
                "itl_s": np.asarray(self._itl_s, dtype=np.float64),
                "count": np.asarray(self._itl_count, dtype=np.int64),
            }
        )
        return RunFrames(requests=requests, steps=steps, itl=itl)
