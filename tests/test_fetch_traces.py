"""`tools/fetch_traces.sh` run for real against a local copy of the two hosts it reads.

The script's hosts are overridable (``RAW_BASE``, ``MEDIA_BASE``); here they are ``file://``
folders laid out as raw.githubusercontent.com and media.githubusercontent.com lay out the
Mooncake and Qwen-Bailian repositories, with the tool-agent trace behind a Git LFS pointer as
it is upstream. The fetched files then go through ``simkv cache-curve`` and a trace workload, so
everything but the network is exercised.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "fetch_traces.sh"
MOONCAKE = "kvcache-ai/Mooncake/main/FAST25-release/traces"
BAILIAN = "alibaba-edu/qwen-bailian-usagetraces-anon/main"
BAILIAN_FILES = [f"qwen_{n}_blksz_16.jsonl" for n in ("traceA", "traceB", "coder", "thinking")]


def _mooncake_rows() -> str:
    """Four tool-agent calls (ms timestamps, 512-token ids), the later ones extending a prefix."""
    rows = [(0, 1000, [0, 1]), (500, 1600, [0, 1, 2, 3]), (900, 700, [4, 5]),
            (1500, 2100, [0, 1, 2, 3, 6])]  # fmt: skip
    return "".join(
        json.dumps({"timestamp": t, "input_length": n, "output_length": 8, "hash_ids": ids}) + "\n"
        for t, n, ids in rows
    )


def _bailian_rows() -> str:
    """A two-turn chat (16-token ids, seconds) and an unrelated call."""
    rows = [
        {"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.0, "input_length": 40,
         "output_length": 5, "type": "text", "turn": 1, "hash_ids": [10, 11, 12]},
        {"chat_id": 2, "parent_chat_id": 1, "timestamp": 2.5, "input_length": 70,
         "output_length": 5, "type": "text", "turn": 2, "hash_ids": [10, 11, 12, 13, 14]},
        {"chat_id": 3, "parent_chat_id": -1, "timestamp": 3.0, "input_length": 33,
         "output_length": 4, "type": "text", "turn": 1, "hash_ids": [20, 21, 22]},
    ]  # fmt: skip
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def hosts(tmp_path: Path) -> dict[str, str]:
    """``file://`` raw and media hosts holding every file the script fetches."""
    raw, media = tmp_path / "raw", tmp_path / "media"
    for base in (raw / MOONCAKE, media / MOONCAKE, raw / BAILIAN):
        base.mkdir(parents=True)
    (raw / MOONCAKE / "conversation_trace.jsonl").write_text(_mooncake_rows())
    pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n"
    (raw / MOONCAKE / "toolagent_trace.jsonl").write_text(pointer)
    (media / MOONCAKE / "toolagent_trace.jsonl").write_text(_mooncake_rows())
    for name in BAILIAN_FILES:
        (raw / BAILIAN / name).write_text(_bailian_rows())
    out = tmp_path / "reports" / "traces"
    return {"RAW_BASE": raw.as_uri(), "MEDIA_BASE": media.as_uri(), "OUT": str(out)}


def _fetch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_fetches_every_trace_and_resolves_the_lfs_pointer(hosts):
    result = _fetch(hosts)
    assert result.returncode == 0, result.stderr
    out = Path(hosts["OUT"])
    names = ["conversation_trace.jsonl", "toolagent_trace.jsonl", *BAILIAN_FILES]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    tool = (out / "toolagent_trace.jsonl").read_text()
    assert tool == _mooncake_rows()  # the media host's bytes, not the pointer
    assert f"wrote {out}/toolagent_trace.jsonl (4 lines)" in result.stdout


def test_one_family_fetches_only_its_files(hosts):
    assert _fetch(hosts, "bailian").returncode == 0
    assert sorted(p.name for p in Path(hosts["OUT"]).iterdir()) == sorted(BAILIAN_FILES)


def test_unknown_family_is_refused_before_anything_is_written(hosts):
    result = _fetch(hosts, "azure")
    assert result.returncode == 2 and "usage:" in result.stderr
    assert not Path(hosts["OUT"]).exists()


def test_a_page_that_is_not_a_trace_is_refused_and_not_kept(hosts, tmp_path):
    bad = tmp_path / "raw" / BAILIAN / "qwen_coder_blksz_16.jsonl"
    bad.write_text("<!DOCTYPE html><html>rate limited</html>\n")
    result = _fetch(hosts, "bailian")
    assert result.returncode == 1
    assert "qwen_coder_blksz_16.jsonl: not a trace with hash_ids" in result.stderr
    assert not list(Path(hosts["OUT"]).glob("qwen_coder*"))


def test_a_missing_file_fails(hosts, tmp_path):
    (tmp_path / "raw" / MOONCAKE / "conversation_trace.jsonl").unlink()
    assert _fetch(hosts, "mooncake").returncode != 0


def test_fetched_traces_feed_cache_curve(hosts, tmp_path):
    assert _fetch(hosts).returncode == 0
    out = Path(hosts["OUT"])
    curve = tmp_path / "curve"
    args = [sys.executable, "-m", "simkv", "cache-curve", str(out / "toolagent_trace.jsonl"),
            "--model", "llama-3-8b", "--out", str(curve)]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(curve / "cache_curve.csv")
    # never evicting: call 1 reuses call 0's two ids (1000 // 16 = 62 full blocks of them),
    # call 3 reuses call 1's four ids (1600 // 16 = 100 blocks)
    assert table["hit_tokens"].iloc[-1] == (62 + 100) * 16
    bailian = tmp_path / "bailian_curve"
    args[4], args[-1] = str(out / "qwen_coder_blksz_16.jsonl"), str(bailian)
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # turn 2 reuses turn 1's three 16-token ids, the last of them partial (40 = 2 x 16 + 8)
    assert pd.read_csv(bailian / "cache_curve.csv")["hit_tokens"].iloc[-1] == 2 * 16


def test_a_fetched_bailian_trace_replays_with_its_prefixes(hosts, tmp_path):
    assert _fetch(hosts, "bailian").returncode == 0
    trace = Path(hosts["OUT"]) / "qwen_thinking_blksz_16.jsonl"
    config = tmp_path / "bailian.yaml"
    config.write_text(
        f"name: bailian\nworkload: {{kind: trace, path: {trace}}}\nmodel: llama-3-8b\n"
        "gpu: a100-80gb\nkv_cache: {prefix_caching: hash}\nscheduler: {kind: vllm_v1}\n"
    )
    out = tmp_path / "run"
    args = [sys.executable, "-m", "simkv", "run", str(config), "--out", str(out)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    requests = pd.read_parquet(out / "requests.parquet").sort_values("arrival_s")
    assert requests["arrival_s"].tolist() == [0.0, 2.5, 3.0]  # the trace's own seconds
    # turn 2 (after turn 1 finished) finds turn 1's two full 16-token blocks in HBM
    assert requests["prefix_hit_tokens"].tolist() == [0, 32, 0]
