"""A measured run as a simkv workload: the measured arrivals, lengths and prompt content."""

from __future__ import annotations

import numpy as np

from simkv.measured.runs import MeasuredRun
from simkv.workload.request import Workload
from simkv.workload.token_content import content_from_token_ids


def measured_workload(
    run: MeasuredRun, *, limit: int | None = None, content: bool = True
) -> Workload:
    """The first ``limit`` requests (all when None) of ``run`` in arrival order, arriving at
    the measured ``arrival_s`` with the measured prompt and output lengths, priority 0.

    With ``content`` and prompt token ids in the run, the workload carries exact prompt content
    (:func:`~simkv.workload.token_content.content_from_token_ids`), so prefix caching shares
    exactly the blocks the real engine could share; otherwise every prompt is unique.
    """
    req = run.requests if limit is None else run.requests.iloc[:limit]
    ids = run.prompt_token_ids
    prompt_content = None
    if content and ids is not None:
        prompt_content = content_from_token_ids(ids[: len(req)])
    kept = "" if len(req) == len(run.requests) else f", first {len(req)}"
    return Workload(
        req["arrival_s"].to_numpy(np.float64, copy=True),
        req["prompt_tokens"].to_numpy(np.int64, copy=True),
        req["output_tokens"].to_numpy(np.int64, copy=True),
        np.zeros(len(req), np.int64),
        f"measured {run.label}: {len(req)} requests{kept}",
        prompt_content,
    )
