"""Hostile trace and table files: one located error each, no overflow or traceback (issue 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simkv.errors import InputError
from simkv.measured.step_table import read_step_table
from simkv.workload.traces import read_lengths


def _read(tmp_path: Path, name: str, content: bytes) -> InputError:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError) as err:
        read_lengths(path, column="length")
    return err.value


@pytest.mark.parametrize(
    ("name", "content", "line", "fragment"),
    [
        ("a.csv", b"length\n5\n1e30\n", 3, "must be ≤"),
        ("b.csv", b"length\n5\n3000000000\n", 3, "must be ≤"),
        ("c.csv", b"length\ntrue\nfalse\n", 2, "not a number"),
        ("d.jsonl", b'{"length": 4}\n{"length": true}\n', 2, "not a number"),
        (
            "e.jsonl",
            b'{"length": 4}\n' + b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
            2,
            "nested too deeply",
        ),
        ("f.csv", b"length\n5\n\xe9\n", 3, "not UTF-8"),
    ],
)
def test_bad_length_traces_are_located(
    tmp_path: Path, name: str, content: bytes, line: int, fragment: str
) -> None:
    err = _read(tmp_path, name, content)
    assert err.line == line
    assert fragment in err.message


def test_azure_timestamps_with_two_utc_offsets_are_read(tmp_path: Path) -> None:
    from simkv.tables import read_table
    from simkv.workload.traces import _azure_seconds

    path = tmp_path / "azure.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900+00:00,374,44\n"
        "2023-11-16 19:15:47.6805900+01:00,396,109\n"
    )
    seconds = _azure_seconds(read_table(path))
    assert seconds.tolist() == pytest.approx([0.0, 1.0])


def test_cost_table_not_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_bytes(b"num_tokens,step_time_ms\n1,2\n\xff,3\n")
    with pytest.raises(InputError) as err:
        read_step_table(path)
    assert (err.value.line, "not UTF-8" in err.value.message) == (3, True)
