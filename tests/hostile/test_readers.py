"""Readers of unbounded user files stream within the limits of :mod:`simkv.text`: a line, a
field or a JSON nesting beyond them is one located line, exit 2; no file is read whole."""

from __future__ import annotations

from pathlib import Path

import pytest

import simkv.text
from simkv.errors import InputError
from simkv.measured import read_measured_run
from simkv.tables import read_table
from simkv.text import MAX_JSON_DEPTH, parse_json
from tests.hostile.cli import one_error, succeeds

HEADER = "arrival_s,prompt_tokens,output_tokens"


def test_cost_table_field_over_the_csv_limit_is_located(tiny: Path) -> None:
    (tiny.parent / "steps.csv").write_text(f'num_tokens,step_time_ms\n1,2\n2,"{"1" * 200_000}"\n')
    tiny.write_text(tiny.read_text() + "cost_model: {kind: table, path: steps.csv}\n")
    line = one_error(["run", str(tiny), "--out", str(tiny.parent / "o")], "steps.csv:3")
    assert "field larger than field limit" in line


def test_trace_line_over_the_limit_is_located(tiny: Path, monkeypatch) -> None:
    monkeypatch.setattr(simkv.text, "MAX_LINE_BYTES", 1000)
    (tiny.parent / "trace.csv").write_text(f"{HEADER}\n0,10,5\n0.01,20,{'3' * 2000}\n0.02,7,9\n")
    line = one_error(["run", str(tiny), "--out", str(tiny.parent / "o")], "trace.csv:3")
    assert "longer than 1000 bytes" in line


def test_quoted_row_spanning_lines_over_the_limit_is_located(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(simkv.text, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "t.csv"
    field = "\n".join(["x" * 50] * 40)  # every line short, the quoted field 2 KB
    path.write_text(f'{HEADER},note\n0,10,5,a\n0.01,20,3,"{field}"\n')
    with pytest.raises(InputError) as err:
        read_table(path)
    assert (err.value.line, "row longer than 1000 bytes" in err.value.message) == (3, True)


def test_rows_within_the_limit_are_read_as_before(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(simkv.text, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "t.csv"
    path.write_text(f'{HEADER},note\n0,10,5,"a\nb"\n\n0.01,20,3,"x ""y"""\n')
    table = read_table(path)
    assert table.frame["note"].tolist() == ["a\nb", 'x "y"']


def test_measured_jsonl_line_over_the_limit_is_located(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(simkv.text, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "m.jsonl"
    row = '{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 2, "ttft_s": 1, "e2el_s": 2}\n'
    path.write_text(row + row.replace('"e2el_s": 2', '"e2el_s": 2, "x": "' + "y" * 2000 + '"'))
    with pytest.raises(InputError) as err:
        read_measured_run(path)
    assert (err.value.file, err.value.line) == (str(path), 2)


def test_bench_json_nested_100000_deep_is_located(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    path.write_text('{"date": "x",\n "a": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    line = one_error(["calibrate", str(path), "--out", str(tmp_path / "p.yaml")], "bench.json:2")
    assert "nested too deeply" in line


def test_meta_json_nested_deep_is_located(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "requests.jsonl").write_text('{"request_id": "bench-0"}\n')
    (folder / "meta.json").write_text('{"engine_kwargs": ' + "{" * 100_000 + "}" * 100_000 + "}")
    with pytest.raises(InputError) as err:
        read_measured_run(folder)
    assert (err.value.file, err.value.line) == (str(folder / "meta.json"), 1)


def test_distserve_json_nested_deep_is_located(tiny: Path) -> None:
    (tiny.parent / "profile.json").write_text('{"m": {"1":\n' + "[" * 5000 + "]" * 5000 + "}}")
    tiny.write_text(tiny.read_text() + "cost_model: {kind: table, path: profile.json}\n")
    line = one_error(["run", str(tiny), "--out", str(tiny.parent / "o")], "profile.json:2")
    assert "nested too deeply" in line


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1])
def test_json_depth_limit(depth: int) -> None:
    text = '{"s": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",\n "v": '
    text += "[" * (depth - 1) + "]" * (depth - 1) + "}"
    if depth <= MAX_JSON_DEPTH:
        assert parse_json(text, "f.json")["s"].startswith("[[[")
        return
    with pytest.raises(InputError) as err:
        parse_json(text, "f.json")
    assert err.value.line == 2


def test_json_integer_of_10000_digits_is_located() -> None:
    with pytest.raises(InputError) as err:
        parse_json('{\n"a": ' + "9" * 10_000 + "}", "f.json", line=5)
    assert err.value.line == 5


def test_sweep_into_a_relative_out_with_a_colon_resumes(tiny: Path, monkeypatch) -> None:
    monkeypatch.chdir(tiny.parent)
    sweep = tiny.parent / "sweep.yaml"
    sweep.write_text("name: colon\nbase: tiny.yaml\ngrid:\n  kv_cache.num_blocks: [40, 50]\n")
    succeeds(["sweep", "sweep.yaml", "--out", "ab:12/x"])
    again = succeeds(["sweep", "sweep.yaml", "--out", "ab:12/x", "--resume"])
    assert "0 runs ran, 2 skipped" in again
    succeeds(["report", "ab:12/x"])


def test_sweep_resume_redoes_a_run_whose_summary_is_nested_deep(tiny: Path) -> None:
    sweep = tiny.parent / "sweep.yaml"
    sweep.write_text("name: deep\nbase: tiny.yaml\ngrid:\n  kv_cache.num_blocks: [40, 50]\n")
    out = tiny.parent / "s"
    succeeds(["sweep", str(sweep), "--out", str(out)])
    summary = sorted((out / "runs").glob("*/summary.json"))[0]
    summary.write_text("[" * 100_000 + "]" * 100_000)
    again = succeeds(["sweep", str(sweep), "--out", str(out), "--resume"])
    assert "1 runs ran, 1 skipped" in again


def test_a_quote_inside_an_unquoted_field_opens_no_row(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(simkv.text, "MAX_LINE_BYTES", 200)
    path = tmp_path / "t.csv"
    rows = "".join(f"{i / 100},10,5,row {i}\n" for i in range(1, 40))  # 600 bytes after the quote
    path.write_text(f'{HEADER},note\n0,10,5,a 12" pizza\n{rows}0.5,1,1,"x"",y"\n')
    table = read_table(path)
    assert table.frame["note"].tolist()[0] == 'a 12" pizza'
    assert table.frame["note"].tolist()[-1] == 'x",y'
