"""Format detection of read_measured_run and read_engine_settings."""

from __future__ import annotations

import pytest

from simkv.errors import InputError
from simkv.measured import read_engine_settings, read_measured_run
from tests.measured.conftest import RTX4090, RTXPRO6000


def test_a_folder_or_its_requests_file():
    assert read_measured_run(RTX4090 / "requests.jsonl").label == RTX4090.name


def test_engine_settings_read_from_meta_alone(rtx4090):
    assert read_engine_settings(RTX4090) == rtx4090.engine
    assert read_engine_settings(RTXPRO6000).max_num_seqs == 128


def test_generic_csv_has_no_engine_settings(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,ttft_s,e2el_s\n0,1,1,0.1,0.1\n")
    assert read_engine_settings(path) is None


def test_missing_path(tmp_path):
    with pytest.raises(InputError, match="no such file") as info:
        read_measured_run(tmp_path / "nowhere")
    assert info.value.file == str(tmp_path / "nowhere")


def test_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "requests.jsonl").write_text("{}\n")
    with pytest.raises(InputError, match="unknown measurement format: a folder"):
        read_measured_run(tmp_path)
    with pytest.raises(InputError, match="unknown measurement format"):
        read_engine_settings(tmp_path)


def test_one_line_jsonl_is_a_table(tmp_path):
    path = tmp_path / "m.txt"
    path.write_text('{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 2, "ttft_s": 0.5, '
                    '"e2el_s": 0.7}\n')  # fmt: skip
    assert len(read_measured_run(path)) == 1
