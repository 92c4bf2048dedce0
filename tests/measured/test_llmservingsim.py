"""The LLMServingSim-style run folder: both bundled vLLM runs and every bad-input case."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from simkv.errors import InputError
from simkv.measured import EngineSettings, read_measured_run
from tests.measured.conftest import RTX4090, STREAM, make_run, request, write_jsonl


def test_rtx4090_run(rtx4090):
    req = rtx4090.requests
    assert len(rtx4090) == 300 and rtx4090.label == "RTX4090_Llama-3.1-8B"
    assert list(req.columns) == [
        "arrival_s", "prompt_tokens", "output_tokens", "ttft_s", "e2el_s", "first_scheduled_s",
    ]  # fmt: skip
    assert req["arrival_s"].iloc[0] == 0.0 and req["arrival_s"].is_monotonic_increasing
    assert req["prompt_tokens"].dtype == np.int64 and req["ttft_s"].dtype == np.float64
    assert (req["first_scheduled_s"] >= req["arrival_s"]).all()
    assert rtx4090.engine == EngineSettings(
        model="meta-llama/Llama-3.1-8B", gpu="NVIDIA GeForce RTX 4090", tensor_parallel=1,
        data_parallel=1, expert_parallel=False,
        max_num_seqs=256, max_num_batched_tokens=2048, max_model_len=32768, block_size=16,
        num_gpu_blocks=2588, enable_prefix_caching=True, enable_chunked_prefill=True,
        reserve_full_prompt=True, dtype="bfloat16", kv_cache_dtype="auto",
        engine_version="vllm 0.19.0",
    )  # fmt: skip
    assert rtx4090.notes == ()


def test_rtxpro6000_short_meta(rtxpro6000):
    assert len(rtxpro6000) == 300
    engine = rtxpro6000.engine
    assert (engine.max_num_seqs, engine.max_num_batched_tokens, engine.tensor_parallel) == (
        128, 2048, 1,
    )  # fmt: skip
    assert engine.max_model_len is None and engine.num_gpu_blocks is None
    assert engine.block_size is None and engine.gpu is None
    assert engine.engine_version == "vllm 0.19.0"


def test_token_ids_match_the_stream_line_of_each_request(rtx4090):
    ids = rtx4090.prompt_token_ids
    assert ids is not None and len(ids) == 300
    assert all(len(t) == n for t, n in zip(ids, rtx4090.requests["prompt_tokens"], strict=True))
    stream = [json.loads(line) for line in STREAM.read_text().splitlines()]
    requests = [json.loads(line) for line in (RTX4090 / "requests.jsonl").read_text().splitlines()]
    # the bundled runs are already in arrival order: row i is bench-i, line i of the stream
    assert [r["request_id"] for r in requests] == [f"bench-{i}" for i in range(300)]
    for i in (0, 1, 150, 299):
        assert ids[i].tolist() == stream[i]["input_tok_ids"]
        assert rtx4090.requests["output_tokens"].iloc[i] == stream[i]["output_toks"]


def test_timeseries(rtx4090, rtxpro6000):
    ts = rtx4090.timeseries
    assert list(ts.columns) == [
        "t_s", "running", "waiting", "kv_usage", "prompt_throughput", "gen_throughput",
    ]  # fmt: skip
    assert len(ts) == 184 and ts["kv_usage"].iloc[0] == pytest.approx(0.1322)
    assert ts["kv_usage"].between(0, 1).all()
    pro = rtxpro6000.timeseries
    assert pro["kv_usage"].isna().all()  # logged as 0.0 throughout: not logged
    assert any("not logged" in note for note in rtxpro6000.notes)


def test_rows_are_sorted_by_arrival_and_token_ids_follow(tmp_path):
    stream = [{"input_toks": 4, "output_toks": 3, "input_tok_ids": [i, 1, 2, 3]} for i in range(2)]
    folder = make_run(tmp_path / "run", [request(1, 5.0), request(0, 7.0)], stream=stream)
    run = read_measured_run(folder)
    assert run.requests["arrival_s"].tolist() == [0.0, 2.0]
    assert [ids[0] for ids in run.prompt_token_ids] == [1, 0]
    assert run.requests["ttft_s"].tolist() == pytest.approx([0.5, 0.5])
    assert run.requests["first_scheduled_s"].tolist() == pytest.approx([0.1, 2.1])


def test_stream_in_the_parent_folder_and_missing_stream(tmp_path):
    folder = make_run(tmp_path / "run", [request(0, 1.0)])
    run = read_measured_run(folder)
    assert run.prompt_token_ids is None and "not found" in run.notes[0]
    write_jsonl(tmp_path / "stream.jsonl", [{"input_toks": 4, "output_toks": 3,
                                            "input_tok_ids": [9, 8, 7, 6]}])  # fmt: skip
    assert read_measured_run(folder / "requests.jsonl").prompt_token_ids[0].tolist() == [9, 8, 7, 6]


def fails(path, *, line, field, match):
    with pytest.raises(InputError, match=match) as info:
        read_measured_run(path)
    err = info.value
    assert (err.line, err.field) == (line, field)
    return err


def test_missing_field(tmp_path):
    rows = [request(0, 1.0), request(1, 2.0), request(2, 3.0)]
    del rows[2]["first_token_ts"]
    err = fails(make_run(tmp_path, rows), line=3, field="first_token_ts", match="missing")
    assert err.file.endswith("requests.jsonl")


def test_missing_field_in_every_row(tmp_path):
    rows = [request(0, 1.0)]
    del rows[0]["last_token_ts"]
    fails(make_run(tmp_path, rows), line=1, field="last_token_ts", match="missing column")


def test_non_numeric_value(tmp_path):
    rows = [request(0, 1.0), request(1, 2.0, queued_ts="soon")]
    fails(make_run(tmp_path, rows), line=2, field="queued_ts", match="not a number")


def test_first_token_before_queued(tmp_path):
    rows = [request(0, 1.0), request(1, 2.0, first_token_ts=1.9)]
    fails(make_run(tmp_path, rows), line=2, field="first_token_ts", match="clock skew")


def test_last_token_before_first(tmp_path):
    rows = [request(0, 1.0, last_token_ts=1.4)]
    fails(make_run(tmp_path, rows), line=1, field="last_token_ts", match="clock skew")


def test_scheduled_before_queued(tmp_path):
    rows = [request(0, 1.0, scheduled_ts=0.9)]
    fails(make_run(tmp_path, rows), line=1, field="scheduled_ts", match="clock skew")


def test_zero_output_request(tmp_path):
    rows = [request(0, 1.0), request(1, 2.0, output=0)]
    fails(make_run(tmp_path, rows), line=2, field="output_toks", match="zero output")


def test_empty_requests_file(tmp_path):
    folder = make_run(tmp_path, [])
    with pytest.raises(InputError, match="empty") as info:
        read_measured_run(folder)
    assert info.value.file.endswith("requests.jsonl")


def test_bad_request_id(tmp_path):
    stream = [{"input_toks": 4, "output_toks": 3, "input_tok_ids": [1, 2, 3, 4]}]
    rows = [request(0, 1.0) | {"request_id": "chat-7"}]
    fails(make_run(tmp_path, rows, stream=stream), line=1, field="request_id", match="bench-")


def test_request_beyond_the_stream(tmp_path):
    stream = [{"input_toks": 4, "output_toks": 3, "input_tok_ids": [1, 2, 3, 4]}]
    rows = [request(0, 1.0), request(5, 2.0)]
    fails(make_run(tmp_path, rows, stream=stream), line=2, field="request_id", match="no line")


def test_stream_length_mismatch_names_the_stream_line(tmp_path):
    stream = [{"input_toks": 4, "output_toks": 3, "input_tok_ids": [1, 2, 3, 4]},
              {"input_toks": 4, "output_toks": 9, "input_tok_ids": [1, 2, 3, 4]}]  # fmt: skip
    folder = make_run(tmp_path, [request(0, 1.0), request(1, 2.0)], stream=stream)
    err = fails(folder, line=2, field="output_toks", match="bench-1")
    assert err.file.endswith("stream.jsonl") and "requests.jsonl:2" in err.message


def test_stream_token_ids_disagree_with_their_count(tmp_path):
    stream = [{"input_toks": 4, "output_toks": 3, "input_tok_ids": [1, 2, 3]}]
    folder = make_run(tmp_path, [request(0, 1.0)], stream=stream)
    err = fails(folder, line=1, field="input_tok_ids", match="3 token ids")
    assert err.file.endswith("stream.jsonl")


def test_meta_value_of_the_wrong_type(tmp_path):
    folder = make_run(tmp_path, [request(0, 1.0)], meta={"engine_kwargs": {"max_num_seqs": "x"}})
    err = fails(folder, line=3, field="engine_kwargs.max_num_seqs", match="integer")
    assert err.file.endswith("meta.json")


def test_bundled_copy_of_a_run_reads_anywhere(tmp_path):
    """A run folder copied with its request stream beside it reads with nothing else."""
    shutil.copytree(RTX4090, tmp_path / RTX4090.name)
    shutil.copy(STREAM, tmp_path / STREAM.name)
    run = read_measured_run(tmp_path / RTX4090.name)
    assert run.prompt_token_ids is not None and len(run) == 300
