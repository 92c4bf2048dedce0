"""Per-request latencies, the one definition the summary's statistics and the Python API share.

For a finished request: ``ttft_ms`` = first token − arrival; ``e2el_ms`` = finish − arrival;
``tpot_ms`` = (finish − first token) / (output tokens per sequence − 1), defined only for
requests with more than one output token per sequence (vLLM's benchmark definition; a
multi-sequence request's ``generated_tokens`` counts every sequence). Requests that did not
finish (rejected, aborted) have none of the three: NaN.
"""

from __future__ import annotations

import pandas as pd

LATENCY_COLUMNS = ("ttft_ms", "tpot_ms", "e2el_ms")


def request_latencies(requests: pd.DataFrame) -> pd.DataFrame:
    """:data:`LATENCY_COLUMNS` of each row of a requests frame (same index), in ms."""
    finished = requests["status"] == "finished"
    ttft_ms = (requests["first_token_s"] - requests["arrival_s"]) * 1e3
    per_seq = requests["generated_tokens"] / requests["num_seqs"]  # a sequence's own tokens
    tpot_ms = (requests["finish_s"] - requests["first_token_s"]) * 1e3 / (per_seq - 1)
    e2el_ms = (requests["finish_s"] - requests["arrival_s"]) * 1e3
    return pd.DataFrame(
        {
            "ttft_ms": ttft_ms.where(finished),
            "tpot_ms": tpot_ms.where(finished & (per_seq > 1)),
            "e2el_ms": e2el_ms.where(finished),
        },
        index=requests.index,
    )
