"""The steps of the real sweeps against the waiting queue, and the text of the saturation block.

:func:`queue_stats` reads each real run's engine steps (``steps.csv``) beside its requests
(``requests.jsonl``): a request waits at a step when the engine had queued it
(``queued_ts``) before the step began and first scheduled it (``scheduled_ts``) after the step
ended: it was left in the scheduler's waiting queue, what simkv's
``queued_request_overhead_ms`` is charged for. Steps' ``t_s`` count from the start of the run,
which is the first request's arrival (tools/vllm_reference/live.py, ``serve``: its plan's
first arrival is at 0); the count agrees with the waiting column the harness sampled once a
second (``timeseries.csv``; e.g. small-llama-chat-r5-0 at 5 s intervals: 5, 19-20 vs 21, 27,
35, 18, 0). benchmarks/saturation_prose.py writes the text, benchmarks/saturation.py the rest.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import cpu_live
import numpy as np
from doc_blocks import markdown_table as table

from simkv.config.cost import RooflineCostConfig

ORACLE = "calibrated, at the run's speed"
"""The label of the oracle replay (benchmarks/saturation.py defines what it is)."""

MIN_QUEUED_STEPS = 20
"""A run enters :func:`queue_table` when at least this many of its steps left a request
waiting (fewer say nothing about a per-request cost)."""


def waiting_counts(
    began: np.ndarray, ended: np.ndarray, queued: np.ndarray, scheduled: np.ndarray
) -> np.ndarray:
    """Per step (``began``, ``ended``: s), the requests it left waiting: queued at or before
    its start and first scheduled after its end (``queued``, ``scheduled``: per request, s,
    the same clock). A request the step itself admits is scheduled during it and not counted."""
    if np.any(ended < began) or np.any(scheduled < queued):
        raise ValueError("a step ends before it begins or a request is scheduled before queued")
    return ((queued[None, :] <= began[:, None]) & (scheduled[None, :] > ended[:, None])).sum(1)


def step_queue(path: Path, profiles: dict[str, RooflineCostConfig]) -> dict[str, np.ndarray]:
    """Per step of the run at ``path``: measured and predicted time in ms (the profile of the
    device it ran on, ``profiles``: device → profile), and the number of requests the step left
    waiting."""
    predicted, measured = cpu_live.step_prices(path, profiles[cpu_live.device(path)])
    with (path / "steps.csv").open(newline="") as f:
        began = np.array([float(r["t_s"]) for r in csv.DictReader(f)])
    reqs = [json.loads(line) for line in (path / "requests.jsonl").read_text().splitlines()]
    start = min(r["arrival_time"] for r in reqs)
    queued = np.array([r["queued_ts"] for r in reqs]) - start
    scheduled = np.array([r["scheduled_ts"] for r in reqs]) - start
    waiting = waiting_counts(began, began + measured / 1e3, queued, scheduled)
    return {"measured": measured, "predicted": predicted, "waiting": waiting}


@dataclass(frozen=True)
class QueueStats:
    """One real run's steps against the waiting queue (:func:`queue_stats`)."""

    name: str
    load: float  # the machine's 1-minute load average at the run's end
    steps: int
    queued: int  # steps that left at least one request waiting
    most: int  # the most requests one step left waiting
    ratio_empty: float  # measured / predicted step time, steps leaving none waiting
    ratio_queued: float  # the same over the steps leaving some waiting (nan if none)
    slope_ms: float  # least squares: residual (measured - predicted, ms) per waiting request


def queue_stats(folder: Path, profiles: dict[str, RooflineCostConfig]) -> list[QueueStats]:
    """:class:`QueueStats` of every run in ``folder``, steps priced by the profile of the
    device each ran on (``profiles``: device → profile)."""
    out = []
    for name, path in cpu_live._runs(folder):
        s = step_queue(path, profiles)
        busy = s["waiting"] > 0
        ratios = [s["measured"][m].sum() / s["predicted"][m].sum() if m.any() else math.nan
                  for m in (~busy, busy)]  # fmt: skip
        slope = math.nan
        if busy.any():
            design = np.column_stack([np.ones(len(busy)), s["waiting"]])
            slope = np.linalg.lstsq(design, s["measured"] - s["predicted"], rcond=None)[0][1]
        load = json.loads((path / "meta.json").read_text())["hardware"]["load_average_after"][0]
        out.append(QueueStats(name, load, len(busy), int(busy.sum()), int(s["waiting"].max()),
                              *ratios, float(slope)))  # fmt: skip
    return out


def queue_table(stats: list[QueueStats]) -> str:
    """The runs with at least :data:`MIN_QUEUED_STEPS` steps leaving requests waiting."""
    rows = [[q.name, f"{q.load:.2f}", f"{q.steps}", f"{q.queued}", f"{q.most}",
             f"{q.ratio_empty:.2f}", f"{q.ratio_queued:.2f}", f"{q.slope_ms:+.2f}"]
            for q in stats if q.queued >= MIN_QUEUED_STEPS]  # fmt: skip
    header = ["run", "load", "steps", "steps leaving requests waiting", "most waiting",
              "real / sim step time, queue empty", "with requests waiting",
              "residual per waiting request, ms"]  # fmt: skip
    return table(header, rows)


BATCH_BINS = ((1, 4), (5, 8), (9, 16), (17, 24), (25, 32))
"""Decode batch sizes (sequences a step, inclusive) :func:`batch_table` groups steps by."""


def batch_table(
    runs: list[Path], profiles: dict[str, RooflineCostConfig]
) -> tuple[str, dict[str, float]]:
    """The decode-only steps of ``runs`` (one CPU's) by batch size (:data:`BATCH_BINS`):
    how many, their mean measured time, and each profile's (label → profile) mean price; and
    each profile's Diff (%, price over measured time) in the largest bin."""
    seqs, real, priced = [], [], {label: [] for label in profiles}
    for path in runs:
        with (path / "steps.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
        decode = np.array([int(r["prefill_tokens"]) == 0 for r in rows])
        seqs.append(np.array([int(r["num_seqs"]) for r in rows])[decode])
        for label, profile in profiles.items():
            price, measured = cpu_live.step_prices(path, profile)
            priced[label].append(price[decode])
        real.append(measured[decode])
    n, t = np.concatenate(seqs), np.concatenate(real)
    cells = {label: np.concatenate(v) for label, v in priced.items()}
    rows, top = [], {}
    for lo, hi in BATCH_BINS:
        m = (n >= lo) & (n <= hi)
        if m.any():
            top = {label: (c[m].sum() / t[m].sum() - 1) * 100 for label, c in cells.items()}
            rows.append([f"{lo}-{hi}", f"{m.sum():,}", f"{t[m].mean():.1f}",
                         *(f"{c[m].mean():.1f} ({top[label]:+.0f} %)"
                           for label, c in cells.items())])  # fmt: skip
    header = ["sequences a step", "decode steps", "measured, ms",
              *(f"{label}, ms (Diff)" for label in profiles)]  # fmt: skip
    return table(header, rows), top
