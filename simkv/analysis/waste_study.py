"""KV waste of a real trace under paging and under contiguous reservations.

Two measurements, both in token slots (one slot = one token's K and V in every layer):

* **static snapshot**: every sequence resident at its final length (prompt + output); paged
  allocates ``ceil(L / block_size)`` blocks, contiguous reserves per policy (no placement).
  ``waste_frac = 1 - token_slots / allocated_slots``.
* **pool replay** (:mod:`simkv.analysis.waste_replay`): a pool of ``pool_slots`` serves the
  first ``replay_requests`` requests FCFS; time-averaged five-way breakdown per scheme.

Sequences longer than ``max_context_len`` are excluded from every row (counted in the study).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from simkv.analysis.waste_params import WasteParams, make_params
from simkv.analysis.waste_replay import replay_contiguous, replay_paged
from simkv.errors import InputError
from simkv.kv.contiguous import ReservationPolicy
from simkv.kv.waste import CATEGORIES
from simkv.outputs import make_folder, write_file
from simkv.workload.traces import LengthsTable

__all__ = ["WasteParams", "WasteStudy", "make_params", "run_waste_study", "static_waste"]


def static_waste(
    final_tokens: np.ndarray, *, block_sizes: tuple[int, ...], max_context_len: int
) -> pd.DataFrame:
    """Static snapshot rows ``scheme, block_size, token_slots, allocated_slots, waste_frac``.

    ``final_tokens`` must be non-empty and ≤ ``max_context_len``; ``block_size`` is <NA> for
    the contiguous schemes (max: ``max_context_len`` each; pow2: next power of two capped at
    ``max_context_len``; oracle: exactly the final length).
    """
    final = np.asarray(final_tokens, dtype=np.int64)
    token = int(final.sum())
    pow2 = np.left_shift(np.int64(1), np.frexp(final - 1)[1].astype(np.int64))
    rows = [("paged", bs, int((-(-final // bs) * bs).sum())) for bs in block_sizes]
    rows += [
        ("max", None, max_context_len * len(final)),
        ("pow2", None, int(np.minimum(pow2, max_context_len).sum())),
        ("oracle", None, token),
    ]
    frame = pd.DataFrame(rows, columns=["scheme", "block_size", "allocated_slots"])
    frame.insert(2, "token_slots", token)
    frame["block_size"] = frame["block_size"].astype("Int64")
    frame["waste_frac"] = 1.0 - token / frame["allocated_slots"]
    return frame


def _percent(fraction: float) -> str:
    return "n/a" if pd.isna(fraction) else f"{fraction:.1%}"


_STATIC_COLUMNS = ("scheme", "block", "token slots", "allocated slots", "waste")
_REPLAY_COLUMNS = (
    *("scheme", "tokens", "reserved", "internal", "external", "free"),
    *("preempted", "skipped"),
)


class TableRows(NamedTuple):
    """A titled table of display strings (the CLI renders it with rich)."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]


@dataclass(frozen=True)
class WasteStudy:
    """Both measurements of one trace: ``static`` and ``replay`` frames plus their inputs.

    ``requests`` sequences were read, ``excluded_requests`` of them (longer than
    ``params.max_context_len``) left out of every row; the replay used the first
    ``params.replay_requests`` of the rest.
    """

    params: WasteParams
    source: str
    requests: int
    excluded_requests: int
    static: pd.DataFrame
    replay: pd.DataFrame

    def to_table_rows(self) -> list[TableRows]:
        static = [
            (
                str(r.scheme),
                "" if pd.isna(r.block_size) else str(r.block_size),
                f"{r.token_slots:,}",
                f"{r.allocated_slots:,}",
                f"{r.waste_frac:.1%}",
            )
            for r in self.static.itertuples()
        ]
        replay = [
            (
                str(r["scheme"]),
                *(_percent(r[f"{c}_frac"]) for c in CATEGORIES),
                str(r["preemptions"]),
                str(r["skipped_requests"]),
            )
            for r in self.replay.to_dict("records")
        ]
        kept = self.requests - self.excluded_requests
        return [
            TableRows(
                f"Static snapshot: {kept:,} sequences at final length",
                _STATIC_COLUMNS,
                static,
            ),
            TableRows(
                f"Pool replay: {self.params.pool_slots:,} slots, time-averaged share",
                _REPLAY_COLUMNS,
                replay,
            ),
        ]

    def write_csv(self, out_dir: Path) -> list[Path]:
        """Write ``waste_static.csv`` and ``waste_replay.csv`` into ``out_dir``."""
        make_folder(out_dir)
        paths = [out_dir / "waste_static.csv", out_dir / "waste_replay.csv"]
        for path, frame in zip(paths, (self.static, self.replay), strict=True):
            write_file(path, lambda handle, frame=frame: frame.to_csv(handle, index=False))
        return paths


def run_waste_study(table: LengthsTable, params: WasteParams) -> WasteStudy:
    """Static snapshot and the four replays (max, pow2, oracle, paged) of ``table``."""
    final = table.total_tokens
    keep = final <= params.max_context_len
    if not keep.any():
        message = f"no request of {table.source} fits in {params.max_context_len} tokens"
        raise InputError(message, field="max_context_len")
    static = static_waste(
        final[keep], block_sizes=params.block_sizes, max_context_len=params.max_context_len
    )
    prompt = table.prompt_tokens[keep][: params.replay_requests]
    output = table.output_tokens[keep][: params.replay_requests]
    results = [
        replay_contiguous(
            prompt,
            output,
            policy=policy,
            pool_slots=params.pool_slots,
            max_context_len=params.max_context_len,
        )
        for policy in ReservationPolicy
    ]
    results.append(
        replay_paged(
            prompt, output, pool_slots=params.pool_slots, block_size=params.replay_block_size
        )
    )
    replay = pd.DataFrame([r.row() for r in results])
    replay["block_size"] = replay["block_size"].astype("Int64")
    excluded = int((~keep).sum())
    return WasteStudy(params, table.source, len(final), excluded, static, replay)
