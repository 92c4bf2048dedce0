"""Static snapshot exact fractions, parameter validation, the assembled study."""

import numpy as np
import pandas as pd
import pytest

from simkv.analysis.waste_study import (
    WasteParams,
    make_params,
    run_waste_study,
    static_waste,
)
from simkv.errors import InputError
from simkv.workload.traces import LengthsTable


def test_static_waste_exact_fractions():
    frame = static_waste(np.array([3, 5, 16, 17]), block_sizes=(1, 4, 16), max_context_len=32)
    assert list(frame.columns) == [
        "scheme",
        "block_size",
        "token_slots",
        "allocated_slots",
        "waste_frac",
    ]
    assert frame["scheme"].tolist() == ["paged", "paged", "paged", "max", "pow2", "oracle"]
    assert frame["block_size"].tolist()[:3] == [1, 4, 16]
    assert frame["block_size"].isna().tolist() == [False] * 3 + [True] * 3
    assert (frame["token_slots"] == 41).all()
    # paged: 41; ceil to 4 -> 4+8+16+20; ceil to 16 -> 16+16+16+32; max 4*32; pow2 4+8+16+32
    assert frame["allocated_slots"].tolist() == [41, 48, 80, 128, 60, 41]
    expected = [0.0, 7 / 48, 39 / 80, 87 / 128, 19 / 60, 0.0]
    assert frame["waste_frac"].tolist() == pytest.approx(expected, abs=1e-15)


def test_static_pow2_is_capped_at_max_context():
    frame = static_waste(np.array([1, 2, 20]), block_sizes=(4,), max_context_len=24)
    assert frame.set_index("scheme").loc["pow2", "allocated_slots"] == 1 + 2 + 24


def test_make_params_defaults_and_errors():
    assert make_params() == WasteParams()
    assert WasteParams().pool_slots == 15728
    with pytest.raises(InputError, match=r"max_context_len: .*greater than 0"):
        make_params(max_context_len=0)
    with pytest.raises(InputError, match="multiple of replay_block_size"):
        make_params(pool_slots=100)
    with pytest.raises(InputError, match="block_sizes"):
        make_params(block_sizes=())


def _table() -> LengthsTable:
    # finals 3, 5, 16, 17, 41; the last exceeds max context 32
    return LengthsTable(
        np.array([2, 4, 10, 12, 40]), np.array([1, 1, 6, 5, 1]), "lengths of tiny.csv"
    )


def test_run_waste_study(tmp_path):
    params = make_params(
        block_sizes=(1, 4, 16), max_context_len=32, pool_slots=64, replay_requests=3
    )
    study = run_waste_study(_table(), params)
    assert (study.requests, study.excluded_requests) == (5, 1)
    assert study.static["allocated_slots"].tolist() == [41, 48, 80, 128, 60, 41]
    assert study.replay["scheme"].tolist() == ["max", "pow2", "oracle", "paged"]
    assert study.replay["requests"].tolist() == [3, 3, 3, 3]  # first 3 of the 4 kept
    fracs = study.replay.filter(like="_frac").sum(axis=1)
    assert fracs.tolist() == pytest.approx([1.0] * 4)
    static_rows, replay_rows = study.to_table_rows()
    assert static_rows.rows[1] == ("paged", "4", "41", "48", "14.6%")
    assert static_rows.rows[3] == ("max", "", "41", "128", "68.0%")
    assert [row[0] for row in replay_rows.rows] == ["max", "pow2", "oracle", "paged"]
    assert len(replay_rows.columns) == len(replay_rows.rows[0]) == 8
    paths = study.write_csv(tmp_path / "out")
    assert [p.name for p in paths] == ["waste_static.csv", "waste_replay.csv"]
    back = pd.read_csv(paths[0])
    assert back["allocated_slots"].tolist() == [41, 48, 80, 128, 60, 41]


def test_run_waste_study_nothing_fits():
    with pytest.raises(InputError, match=r"no request of lengths of tiny\.csv fits in 2 tokens"):
        run_waste_study(_table(), make_params(max_context_len=2))
