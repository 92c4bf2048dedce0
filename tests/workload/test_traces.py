from pathlib import Path

import numpy as np
import pytest

from simkv.errors import InputError
from simkv.workload.content import block_keys
from simkv.workload.traces import (
    ColumnMap,
    read_column,
    read_lengths,
    read_mooncake_hash_ids,
    read_trace,
)

TRACES = Path(__file__).parents[2] / "traces"  # the bundled copies

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:50.9951690,10,1
2023-11-16 18:15:48.0000000,5,7
"""

GENERIC = """arrival_s,prompt_tokens,output_tokens
0.0,1,2
0.5,3,4
1.0,5,6
2.0,7,8
3.5,9,10
"""


def write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def message(path: Path, **kwargs) -> str:
    with pytest.raises(InputError) as err:
        read_trace(path, **kwargs)
    return str(err.value)


def test_azure_offsets_sorted_stably(tmp_path):
    w = read_trace(write(tmp_path, AZURE))
    assert w.arrival_s.tolist() == [0.0, 1.31941, 4.314579, 4.314579]
    assert w.prompt_tokens.tolist() == [374, 5, 396, 10]  # the tie keeps file order
    assert w.output_tokens.tolist() == [44, 7, 109, 1]
    assert w.priority.tolist() == [0, 0, 0, 0]


def test_azure_offsets_exact_to_the_microsecond_across_midnight(tmp_path):
    text = (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 23:59:59.9999990,1,1\n"
        "2023-11-17 00:00:00.0000010,1,1\n"
        "2023-11-17 00:00:01,1,1\n"
    )
    w = read_trace(write(tmp_path, text), format="azure")
    assert w.arrival_s.tolist() == [0.0, 2e-06, 1.000001]


def test_generic_window_limit_scale_and_rate(tmp_path):
    path = write(tmp_path, GENERIC)
    assert read_trace(path).arrival_s.tolist() == [0.0, 0.5, 1.0, 2.0, 3.5]
    window = read_trace(path, start_s=0.5, end_s=3.5)
    assert window.arrival_s.tolist() == [0.0, 0.5, 1.5]
    assert window.prompt_tokens.tolist() == [3, 5, 7]
    assert read_trace(path, end_s=1.0).arrival_s.tolist() == [0.0, 0.5]
    assert read_trace(path, limit=2).arrival_s.tolist() == [0.0, 0.5]
    assert read_trace(path, start_s=1.0, limit=2).prompt_tokens.tolist() == [5, 7]
    assert read_trace(path, time_scale=2.0).arrival_s.tolist() == [0.0, 1.0, 2.0, 4.0, 7.0]
    rescaled = read_trace(path, rate=2.0)  # 4 gaps over 3.5 s -> 4 gaps over 2 s
    np.testing.assert_allclose(rescaled.arrival_s, [0.0, 2 / 7, 4 / 7, 8 / 7, 2.0])
    assert rescaled.mean_rate_per_s == pytest.approx(2.0)


def test_generic_column_map_with_ms_and_priority(tmp_path):
    text = "t_ms,in,out,prio\n1500,10,1,2\n500,20,2,-1\n"
    columns = ColumnMap("in", "out", arrival_s=None, arrival_ms="t_ms", priority="prio")
    w = read_trace(write(tmp_path, text), columns=columns)
    assert w.arrival_s.tolist() == [0.5, 1.5]
    assert w.prompt_tokens.tolist() == [20, 10]
    assert w.priority.tolist() == [-1, 2]


def test_mooncake_jsonl_and_hash_ids(tmp_path):
    text = (
        '{"timestamp": 40, "input_length": 1024, "output_length": 3, "hash_ids": [0, 1]}\n'
        "\n"
        '{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 2]}\n'
        '{"timestamp": 40, "input_length": 10, "output_length": 1, "hash_ids": [7]}\n'
    )
    path = write(tmp_path, text, "m.jsonl")
    w = read_trace(path)
    assert w.arrival_s.tolist() == [0.0, 0.04, 0.04]
    assert w.prompt_tokens.tolist() == [600, 1024, 10]
    ids = read_mooncake_hash_ids(path)
    assert [a.tolist() for a in ids] == [[0, 2], [0, 1], [7]]
    assert ids[0].dtype == np.int64
    # one segment per hash id: 512 tokens, the last one the remainder; outputs 7 + 1 + i
    assert [w.content.segments(i) for i in range(3)] == [
        [(0, 512), (2, 88)],
        [(0, 512), (1, 512)],
        [(7, 10)],
    ]
    assert w.content.output_ids.tolist() == [8, 9, 10]
    limited = read_trace(path, limit=2, start_s=0.01)
    assert [limited.content.segments(i) for i in range(2)] == [[(0, 512), (1, 512)], [(7, 10)]]
    assert limited.content.output_ids.tolist() == [9, 10]


def test_content_only_for_mooncake_with_hash_ids(tmp_path):
    assert read_trace(write(tmp_path, AZURE)).content is None
    assert read_trace(write(tmp_path, GENERIC)).content is None
    plain = '{"timestamp": 0, "input_length": 600, "output_length": 5}\n'
    assert read_trace(write(tmp_path, plain, "p.jsonl")).content is None


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (
            '"input_length": 1025, "hash_ids": [0, 1]',
            "2 hash ids for input_length 1025: expected ceil(1025 / 512) = 3",
        ),
        (
            '"input_length": 1024, "hash_ids": [0, 1, 2]',
            "3 hash ids for input_length 1024: expected ceil(1024 / 512) = 2",
        ),
        (
            '"input_length": 10, "hash_ids": []',
            "0 hash ids for input_length 10: expected ceil(10 / 512) = 1",
        ),
        ('"input_length": 10, "hash_ids": [-4]', "hash ids must be in [0, 2^63), got [-4]"),
        ('"input_length": 10, "hash_ids": [1.0]', "expected a list of integers"),
    ],
)
def test_unmappable_hash_ids(tmp_path, row, expected):
    good = '{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [0, 1]}\n'
    text = good + "\n" + '{"timestamp": 5, "output_length": 1, ' + row + "}\n"
    path = write(tmp_path, text, "m.jsonl")
    assert message(path) == f"{path}:3 hash_ids: {expected}"


def test_lengths_only_needs_an_arrival_process(tmp_path):
    path = write(tmp_path, "num_prefill_tokens,num_decode_tokens\n5,6\n7,8\n")
    assert "set the workload's arrival process" in message(path)
    w = read_trace(path, arrival=lambda n: np.arange(1, n + 1) * 0.5)
    assert w.arrival_s.tolist() == [0.5, 1.0]
    assert w.output_tokens.tolist() == [6, 8]


def test_arrival_sampler_replaces_timestamps_after_sorting(tmp_path):
    w = read_trace(write(tmp_path, AZURE), arrival=lambda n: np.full(n, 9.0))
    assert w.arrival_s.tolist() == [9.0] * 4
    assert w.prompt_tokens.tolist() == [374, 5, 396, 10]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,abc,4\n",
            ":2 ContextTokens: not a number: 'abc'",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,3,4\n"
            "2023-11-16 18:15:47.1,3,0\n",
            ":3 GeneratedTokens: must be ≥ 1, got 0",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,-3,4\n",
            ":2 ContextTokens: must be ≥ 1, got -3",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,3.5,4\n",
            ":2 ContextTokens: not an integer: 3.5",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,3,4\n"
            "2023-11-16 18:15:47.1,,4\n",
            ":3 ContextTokens: missing value",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,3,4\n\n\n"
            "yesterday,3,4\n",
            ":5 TIMESTAMP: unparsable timestamp 'yesterday'",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,3,4,5\n",
            ":2: malformed CSV: more fields than the header",
        ),
        ("arrival_s,prompt_tokens,output_tokens\n0.5,1,1\n0.5,1,1,1\n", ":3: malformed CSV"),
        (
            "arrival_s,prompt_tokens,output_tokens\n0.5,1,1\n-1,1,1\n",
            ":3 arrival_s: must be ≥ 0, got -1",
        ),
        (
            "arrival_s,prompt_tokens,output_tokens\n0.5,1,1\ninf,1,1\n",
            ":3 arrival_s: not a finite number: inf",
        ),
    ],
)
def test_bad_values_name_file_line_and_column(tmp_path, text, expected):
    path = write(tmp_path, text)
    assert message(path).startswith(f"{path}{expected}")


def test_missing_columns_are_reported_on_line_one(tmp_path):
    path = write(tmp_path, "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.1,3\n")
    assert message(path, format="azure") == (
        f"{path}:1 GeneratedTokens: missing column 'GeneratedTokens' "
        "(columns found: TIMESTAMP, ContextTokens)"
    )
    text = message(path)
    assert text.startswith(f"{path}:1: unknown trace format")
    assert text.endswith("found: TIMESTAMP, ContextTokens")


def test_unreadable_and_empty_files(tmp_path):
    assert message(tmp_path / "absent.csv").startswith(f"{tmp_path / 'absent.csv'}: cannot read")
    assert message(tmp_path).startswith(f"{tmp_path}: cannot read")
    assert "empty trace" in message(write(tmp_path, ""))
    assert "empty trace" in message(write(tmp_path, "arrival_s,prompt_tokens,output_tokens\n"))
    assert "empty trace" in message(write(tmp_path, "\n\n", "e.jsonl"))


def test_jsonl_errors_name_physical_lines(tmp_path):
    good = '{"timestamp": 0, "input_length": 5, "output_length": 1}\n'
    path = write(tmp_path, good + "\n{not json}\n", "a.jsonl")
    assert message(path).startswith(f"{path}:3: invalid JSON")
    path = write(tmp_path, good + "[1, 2]\n", "b.jsonl")
    assert message(path) == f"{path}:2: expected a JSON object per line"
    path = write(tmp_path, good + '{"timestamp": 1, "input_length": 5}\n', "c.jsonl")
    assert message(path) == f"{path}:2 output_length: missing value"
    path = write(tmp_path, "\n" + good.replace("0,", "-5,", 1), "d.jsonl")
    assert message(path) == f"{path}:2 timestamp: must be ≥ 0, got -5"
    path = write(tmp_path, "\n" + good, "e.jsonl")
    assert message(path, format="generic").startswith(f"{path}:2: unknown trace format")


def test_bad_hash_ids(tmp_path):
    text = '{"timestamp": 0, "hash_ids": [1]}\n{"timestamp": 1, "hash_ids": "x"}\n'
    path = write(tmp_path, text, "h.jsonl")
    with pytest.raises(InputError) as err:
        read_mooncake_hash_ids(path)
    assert str(err.value) == f"{path}:2 hash_ids: expected a list of integers"


def test_option_errors(tmp_path):
    path = write(tmp_path, GENERIC)
    assert "no requests left" in message(path, start_s=10.0)
    assert message(path, limit=1, rate=2.0) == f"{path} rate: " + (
        "cannot rescale to a rate: needs ≥ 2 requests at distinct times"
    )


def test_read_lengths_formats(tmp_path):
    azure = read_lengths(write(tmp_path, AZURE))
    assert azure.prompt_tokens.tolist() == [374, 396, 10, 5]  # file order
    assert azure.total_tokens.tolist() == [418, 505, 11, 12]
    share = read_lengths(write(tmp_path, "num_prefill_tokens,num_decode_tokens,x\n3,0\n", "s.csv"))
    assert (share.prompt_tokens.tolist(), share.output_tokens.tolist()) == ([3], [0])
    plain = read_lengths(write(tmp_path, '{"length": 4}\n{"length": 9}\n', "p.jsonl"))
    assert (plain.prompt_tokens.tolist(), plain.output_tokens.tolist()) == ([4, 9], [0, 0])
    chosen = read_lengths(tmp_path / "t.csv", column="GeneratedTokens")
    assert chosen.prompt_tokens.tolist() == [44, 109, 1, 7]
    assert chosen.total_tokens.tolist() == [44, 109, 1, 7]
    other = write(tmp_path, "size\n0\n", "o.csv")
    with pytest.raises(InputError, match="missing column 'length'"):
        read_lengths(other)
    with pytest.raises(InputError, match=r"o\.csv:2 size: must be ≥ 1, got 0"):
        read_lengths(other, column="size")


def test_read_column(tmp_path):
    assert read_column(write(tmp_path, "a,b\n1,2\n3,4\n"), "b").tolist() == [2, 4]


def shared(name: str) -> Path:
    """A bundled trace (traces/README.md): present in every clone."""
    return TRACES / name


def test_real_azure_conv_trace():
    path = shared("azure2023/AzureLLMInferenceTrace_conv.csv")
    w = read_trace(path)
    assert len(w) == 19_366
    assert w.arrival_s[0] == 0.0
    assert w.arrival_s[1] == 4.314579
    assert (w.prompt_tokens[0], w.output_tokens[0]) == (374, 44)
    assert 3500 < w.arrival_s[-1] < 3600


def test_real_azure_code_mooncake_and_sharegpt():
    assert len(read_trace(shared("azure2023/AzureLLMInferenceTrace_code.csv"))) == 8_819
    mooncake = shared("mooncake/synthetic_trace.jsonl")
    w = read_trace(mooncake)
    assert len(w) == 3_993
    assert len(read_mooncake_hash_ids(mooncake)) == 3_993
    lengths = read_lengths(shared("sharegpt/sharegpt_8k_filtered_stats_llama2_tokenizer.csv"))
    assert len(lengths.prompt_tokens) == 30_731
    assert lengths.total_tokens.max() <= 8192


def prefix_matches(hash_ids: list[np.ndarray]) -> list[tuple[int, int | None]]:
    """Per request: the longest prefix of its hash ids that is a prefix of an earlier
    request's, and the first earlier request having it (None when the prefix is empty)."""
    trie: dict[tuple[int, int], int] = {}
    first_request: dict[int, int] = {}
    out: list[tuple[int, int | None]] = []
    for i, ids in enumerate(hash_ids):
        node, depth, earlier = 0, 0, None
        for h in ids.tolist():
            if (node, h) not in trie:
                break
            node, depth = trie[(node, h)], depth + 1
            earlier = first_request[node]
        out.append((depth, earlier))
        node = 0
        for h in ids.tolist():
            node = trie.setdefault((node, h), len(trie) + 1)
            first_request.setdefault(node, i)
    return out


def test_real_mooncake_prefix_identity_matches_block_keys():
    path = shared("mooncake/synthetic_trace.jsonl")
    w = read_trace(path)
    matches = prefix_matches(read_mooncake_hash_ids(path))
    c = w.content
    checked = 0
    for i in range(0, len(w), 7):
        depth, j = matches[i]
        if j is None:
            continue
        n = len(c.segments(i))
        mine = block_keys(c.segments(i), int(c.output_ids[i]), 512, n)
        theirs = block_keys(c.segments(j), int(c.output_ids[j]), 512, n)
        shared_keys = next(
            (k for k, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b), n
        )
        # a partial last block (same id, < 512 tokens) is followed by different outputs
        full = c.segments(i)[depth - 1][1] == 512
        assert shared_keys == (depth if full else depth - 1), i
        checked += 1
    assert checked > 200
    assert sum(depth for depth, _ in matches) == 77_953
