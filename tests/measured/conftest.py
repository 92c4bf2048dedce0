"""Where the bundled vLLM runs are (their fixtures, ``rtx4090`` …, are in tests/conftest.py: the
workload and metrics tests use them too), and a builder of small run folders for the bad-input
cases."""

from __future__ import annotations

import json
from pathlib import Path

MEASURED = Path(__file__).resolve().parents[2] / "traces" / "measured"
LLMSERVINGSIM = MEASURED / "llmservingsim-vllm0.19"
RTX4090 = LLMSERVINGSIM / "RTX4090_Llama-3.1-8B"
RTXPRO6000 = LLMSERVINGSIM / "RTXPRO6000_Llama-3.1-8B"
QWEN3_32B = LLMSERVINGSIM / "RTXPRO6000_Qwen3-32B"
STREAM = LLMSERVINGSIM / "sharegpt-llama-3.1-8b-300-sps10.jsonl"


def request(i: int, queued: float, prompt: int = 4, output: int = 3, **times: float) -> dict:
    """One requests.jsonl record: scheduled 0.1 s, first token 0.5 s, last 1.5 s after queued."""
    row = {"request_id": f"bench-{i}", "input_toks": prompt, "output_toks": output,
           "queued_ts": queued, "scheduled_ts": queued + 0.1, "first_token_ts": queued + 0.5,
           "last_token_ts": queued + 1.5}  # fmt: skip
    row.update(times)
    return row


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def make_run(folder: Path, rows: list[dict], meta: dict | None = None,
             stream: list[dict] | None = None) -> Path:  # fmt: skip
    """A run folder: requests.jsonl, meta.json and (optionally) the request stream next to it."""
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "requests.jsonl", rows)
    meta = {"engine_kwargs": {"max_num_seqs": 8}, "dataset_path": "w/stream.jsonl"} | (meta or {})
    (folder / "meta.json").write_text(json.dumps(meta, indent=2))
    if stream is not None:
        write_jsonl(folder / "stream.jsonl", stream)
    return folder
