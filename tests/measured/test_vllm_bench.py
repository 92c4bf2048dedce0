"""``vllm bench serve --save-result --save-detailed`` results, written as vLLM writes them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simkv.errors import InputError
from simkv.measured import EngineSettings, read_engine_settings
from simkv.measured import read_measured_run as read
from simkv.metrics.measured import measured_metrics


def bench_result(**changes) -> dict:
    """A detailed result of 4 requests (3 ok, the third failed) as vllm/benchmarks/serve.py
    saves it: setup keys, then the benchmark's aggregates and per-request lists."""
    result = {
        "date": "20260820-231939", "endpoint_type": "vllm", "backend": "vllm",
        "label": None, "model_id": "meta-llama/Llama-3.1-8B",
        "tokenizer_id": "meta-llama/Llama-3.1-8B", "num_prompts": 4, "request_rate": 2.0,
        "burstiness": 1.0, "max_concurrency": None, "duration": 3.2, "completed": 3,
        "failed": 1, "total_input_tokens": 60, "total_output_tokens": 8,
        "request_throughput": 0.94, "request_goodput": None, "output_throughput": 2.5,
        "total_token_throughput": 21.2,
        "input_lens": [10, 20, 25, 30],
        "output_lens": [4, 1, 0, 3],
        "ttfts": [0.05, 0.2, 0.0, 0.1],
        "itls": [[0.02, 0.03, 0.05], [], [], [0.04, 0.06]],
        "latencies": [0.15, 0.2, 0.0, 0.2],
        "start_times": [1000.5, 1000.0, 1000.7, 1001.5],
        "queue_times": [0.0, 0.0, 0.0, 0.0],
        "generated_texts": ["a b c d", "x", "", "p q r"],
        "errors": ["", "", "Traceback ...: ClientConnectorError", ""],
        "max_output_tokens_per_s": 4.0, "max_concurrent_requests": 2, "rtfx": 0.0,
        "mean_ttft_ms": 116.7, "median_ttft_ms": 100.0, "std_ttft_ms": 62.4, "p99_ttft_ms": 198.0,
        "max_num_seqs": "256", "gpu": "NVIDIA H100 80GB HBM3",  # --metadata max_num_seqs=256 ...
    }  # fmt: skip
    result.update(changes)
    return result


def write(tmp_path, data, name="vllm-2.0qps-Llama-3.1-8B-20260820-231939.json", indent=None):
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=indent))
    return path


def test_reads_requests_in_send_order_without_the_failed_one(tmp_path):
    run = read(write(tmp_path, bench_result()))
    req = run.requests
    assert req["arrival_s"].tolist() == pytest.approx([0.0, 0.5, 1.5])  # start_times, sorted
    assert req["prompt_tokens"].tolist() == [20, 10, 30]
    assert req["output_tokens"].tolist() == [1, 4, 3]
    assert req["ttft_s"].tolist() == pytest.approx([0.2, 0.05, 0.1])
    assert req["e2el_s"].tolist() == pytest.approx([0.2, 0.15, 0.2])
    assert [gaps.tolist() for gaps in run.itl_s] == [[], [0.02, 0.03, 0.05], [0.04, 0.06]]
    assert run.prompt_token_ids is None and run.timeseries is None
    assert run.notes == ("1 failed requests (non-empty errors) left out",)
    assert run.engine == EngineSettings(
        model="meta-llama/Llama-3.1-8B", gpu="NVIDIA H100 80GB HBM3", max_num_seqs=256
    )


def test_metrics_include_itl(tmp_path):
    m = measured_metrics(read(write(tmp_path, bench_result())))
    assert m["mean_itl_ms"] == pytest.approx(np.mean([20, 30, 50, 40, 60]))
    assert m["median_itl_ms"] == pytest.approx(40.0)
    assert m["mean_tpot_ms"] == pytest.approx(np.mean([100 / 3, 50]))
    assert m["duration_s"] == pytest.approx(1.7)  # last send 1.5 s + its 0.2 s latency


def test_pretty_printed_and_without_suffix(tmp_path):
    path = write(tmp_path, bench_result(), name="result", indent=2)
    assert len(read(path)) == 3


def test_older_result_without_start_times_and_latencies(tmp_path):
    data = bench_result()
    del data["start_times"], data["latencies"]
    run = read(write(tmp_path, data))
    assert run.requests["arrival_s"].tolist() == pytest.approx([0.0, 0.5, 1.5])  # i / rate
    assert run.requests["prompt_tokens"].tolist() == [10, 20, 30]
    assert run.requests["e2el_s"].tolist() == pytest.approx([0.15, 0.2, 0.2])  # ttft + Σ itl
    assert any("evenly spaced" in note for note in run.notes)
    data["request_rate"] = "inf"
    assert read(write(tmp_path, data)).requests["arrival_s"].tolist() == [0.0, 0.0, 0.0]


def test_engine_settings_alone(tmp_path):
    settings = read_engine_settings(write(tmp_path, bench_result()))
    assert settings is not None and settings.max_num_seqs == 256


def fails(path, *, line, field, match):
    with pytest.raises(InputError, match=match) as info:
        read(path)
    assert (info.value.line, info.value.field) == (line, field)
    assert info.value.file == str(path)


def test_result_saved_without_save_detailed(tmp_path):
    detailed = ("input_lens", "output_lens", "start_times", "ttfts", "itls", "errors")
    data = {k: v for k, v in bench_result().items() if k not in detailed}
    fails(write(tmp_path, data), line=1, field="input_lens", match="--save-detailed")


def test_non_numeric_ttft(tmp_path):
    fails(write(tmp_path, bench_result(ttfts=[0.05, "fast", 0.0, 0.1])), line=1,
          field="ttfts[1]", match="not a finite number")  # fmt: skip


def test_non_numeric_ttft_in_pretty_json_names_its_line(tmp_path):
    data = bench_result(ttfts=[0.05, None, 0.0, 0.1])
    path = write(tmp_path, data, indent=2)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if '"ttfts"' in text)
    fails(path, line=line, field="ttfts[1]", match="not a finite number")


def test_fractional_token_count(tmp_path):
    fails(write(tmp_path, bench_result(input_lens=[10, 20.5, 25, 30])), line=1,
          field="input_lens[1]", match="integer")  # fmt: skip


def test_list_of_the_wrong_length(tmp_path):
    fails(write(tmp_path, bench_result(latencies=[0.1, 0.2])), line=1, field="latencies",
          match="4 values")  # fmt: skip


def test_clock_skew_last_before_first(tmp_path):
    fails(write(tmp_path, bench_result(latencies=[0.15, 0.1, 0.0, 0.2])), line=1,
          field="latencies[1]", match="clock skew")  # fmt: skip


def test_zero_output_successful_request(tmp_path):
    fails(write(tmp_path, bench_result(output_lens=[4, 0, 0, 3])), line=1,
          field="output_lens[1]", match="zero output")  # fmt: skip


def test_every_request_failed(tmp_path):
    fails(write(tmp_path, bench_result(errors=["x", "y", "z", "w"])), line=1, field="errors",
          match="every request failed")  # fmt: skip


def test_appended_results(tmp_path):
    path = tmp_path / "appended.json"
    path.write_text(json.dumps(bench_result()) + "\n" + json.dumps(bench_result()))
    with pytest.raises(InputError, match="--append-result") as info:
        read(path)
    assert info.value.line == 2


def test_json_that_is_not_a_bench_result(tmp_path):
    with pytest.raises(InputError, match="unknown measurement format"):
        read(write(tmp_path, {"hello": [1, 2]}))


def test_empty_json_file(tmp_path):
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(InputError, match="empty file"):
        read(tmp_path / "empty.json")
