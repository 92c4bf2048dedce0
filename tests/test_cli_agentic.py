"""Agentic sessions and the agentic traces through the CLI: the shipped config runs, the
bundled and Bailian-format traces replay and give cache curves, bad input is one located line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile.cli import one_error, succeeds

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "agentic.yaml"
CONVERSATION = ROOT / "traces" / "mooncake" / "conversation_trace.jsonl"
SHORT = ["--set", "workload.num_sessions=8"]


def _bailian(path: Path, *, hash_ids: bool = True) -> Path:
    """Four Bailian-format rows (16-token blocks): a root, its follow-up sharing its first two
    blocks, a root listing only its full blocks (35 tokens: 2 ids), and another root."""
    rows = [
        (0, -1, 0.0, 40, [0, 1, 2], 1), (1, 0, 1.5, 60, [0, 1, 3, 4], 2),
        (2, -1, 2.0, 35, [5, 6], 1), (3, -1, 2.5, 16, [7], 1),
    ]  # fmt: skip
    lines = []
    for chat, parent, ts, n, ids, turn in rows:
        row = {"chat_id": chat, "parent_chat_id": parent, "timestamp": ts, "input_length": n,
               "output_length": 8, "type": "text", "turn": turn}  # fmt: skip
        if hash_ids:
            row["hash_ids"] = ids
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_shipped_agentic_config_runs_with_prefix_hits(tmp_path: Path) -> None:
    succeeds(["run", str(CONFIG), *SHORT, "--out", str(tmp_path / "o")])
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["completed"] == summary["num_requests"] > 8
    assert summary["prefix_hit_rate"] > 0.8


def test_bailian_trace_reads_with_16_token_content(tmp_path: Path) -> None:
    from simkv.workload.traces import read_trace

    w = read_trace(_bailian(tmp_path / "b.jsonl"))
    assert w.arrival_s.tolist() == [0.0, 1.5, 2.0, 2.5]  # seconds, not ms
    assert w.content is not None
    assert w.content.segments(0) == [(0, 16), (1, 16), (2, 8)]
    assert w.content.segments(1) == [(0, 16), (1, 16), (3, 16), (4, 12)]
    assert w.content.segments(2) == [(5, 16), (6, 16), (14, 3)]  # tail: max id 7 + 1 + 4 + 2
    assert w.content.output_ids.tolist() == [8, 9, 10, 11]


@pytest.mark.parametrize("trace", ["bailian", "conversation"])
def test_cache_curve_and_trace_workload_on_agentic_traces(tmp_path: Path, trace: str) -> None:
    path = _bailian(tmp_path / "b.jsonl") if trace == "bailian" else CONVERSATION
    out = succeeds(
        ["cache-curve", str(path), "--model", "llama-3-8b", "--out", str(tmp_path / "c")]
    )
    assert "never evicting" in out
    config = tmp_path / "replay.yaml"
    config.write_text(
        f"workload: {{kind: trace, path: {path}, limit: 50}}\nmodel: llama-3-8b\n"
        "gpu: a100-80gb\nkv_cache: {prefix_caching: hash}\nscheduler: {kind: vllm_v1}\n"
    )
    succeeds(["run", str(config), "--out", str(tmp_path / "run")])


def test_cache_curve_of_a_bailian_trace_without_hash_ids_is_one_line(tmp_path: Path) -> None:
    path = _bailian(tmp_path / "b.jsonl", hash_ids=False)
    line = one_error(["cache-curve", str(path), "--out", str(tmp_path / "o")], str(path))
    assert "no prompt content" in line


def test_wrong_bailian_hash_count_is_located(tmp_path: Path) -> None:
    path = _bailian(tmp_path / "b.jsonl")
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace("[0, 1, 3, 4]", "[0, 1]")
    path.write_text("\n".join(lines) + "\n")
    line = one_error(["cache-curve", str(path), "--out", str(tmp_path / "o")], f"{path}:2")
    assert "2 hash ids for input_length 60" in line


@pytest.mark.parametrize(
    ("item", "place", "words"),
    [
        ("workload.fanout.children={kind: fixed, value: -2}",
         "--set workload.fanout.children.value",
         "greater than or equal to 1"),
        ("workload.fanout.probability=1.5", "--set workload.fanout.probability",
         "less than or equal to 1"),
        ("workload.pin_ttl_s=-1", "--set workload.pin_ttl_s", "greater than or equal to 0"),
        ("workload.system_prompt_tokens=40000", "--set workload.system_prompt_tokens",
         "must be below max_prompt_tokens (32000), got 40000"),
        ("workload.fanout.every=0", "--set workload.fanout.every", "greater than 0"),
    ],
)  # fmt: skip
def test_bad_agentic_input_is_one_located_line(
    tmp_path: Path, item: str, place: str, words: str
) -> None:
    line = one_error(["run", str(CONFIG), "--set", item, "--out", str(tmp_path / "o")], place)
    assert words in line
    assert not (tmp_path / "o").exists()


def test_negative_fanout_in_the_file_names_its_line(tmp_path: Path) -> None:
    text = CONFIG.read_text().replace(
        "children: {kind: uniform, low: 2, high: 4}", "children: {kind: fixed, value: -3}"
    )
    lines = text.splitlines()
    line_no = next(i for i, line in enumerate(lines, 1) if "value: -3" in line)
    config = tmp_path / "agentic.yaml"
    config.write_text(text)
    line = one_error(["run", str(config), "--out", str(tmp_path / "o")], f"agentic.yaml:{line_no}")
    assert "greater than or equal to 1" in line
