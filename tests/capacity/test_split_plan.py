"""The split plan (:mod:`simkv.capacity.split_plan`) on configs/disagg.yaml: hand-computed
splits of a GPU budget, a money budget and both, TP degrees per side, and bad budgets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simkv.capacity.split_plan import (
    Budget,
    check_budget,
    parse_prices,
    parse_tp_list,
    plan_splits,
)
from simkv.errors import InputError
from simkv.run import load_config
from tests.conftest import ROOT

CONFIG = ROOT / "configs" / "disagg.yaml"


def _plan(budget: Budget) -> list[tuple[str, int, float | None]]:
    return [(s.name, s.gpus, s.cost_per_hour) for s in plan_splits(CONFIG, [], budget)]


def test_a_money_budget_buys_the_most_decode_replicas_beside_each_prefill_count() -> None:
    # $10/h at $3 per prefill GPU, $2 per decode GPU; decode at TP 1 or 2:
    # TP 1: p=1 leaves $7 → 3 decode ($9); p=2 leaves $4 → 2 ($10); p=3 leaves $1 → none.
    # TP 2 (a replica $4): p=1 → 1 ($7, 3 GPUs); p=2 → 1 ($10); colocated: $10/$2 = 5 at TP 1,
    # $10/$4 = 2 at TP 2.
    budget = Budget(per_hour=10.0, prices=(3.0, 2.0), tp_decode=(1, 2))
    assert _plan(budget) == [
        ("p1tp1-d3tp1", 4, 9.0), ("p2tp1-d2tp1", 4, 10.0), ("p1tp1-d1tp2", 3, 7.0),
        ("p2tp1-d1tp2", 4, 10.0), ("colocated-5tp1", 5, 10.0), ("colocated-2tp2", 4, 8.0),
    ]  # fmt: skip


def test_gpus_and_money_together_must_both_fit() -> None:
    # 4 GPUs and $10/h: p=1 → min(3 GPUs, $7/$2 = 3) decode; p=2 → min(2, 2); p=3 → $1: none.
    budget = Budget(gpus=4, per_hour=10.0, prices=(3.0, 2.0))
    assert _plan(budget) == [("p1-d3", 4, 9.0), ("p2-d2", 4, 10.0), ("colocated-4", 4, 8.0)]


def test_a_budget_of_exactly_n_prices_buys_n_gpus_in_floating_point() -> None:
    # 0.3 - 0.2 = 0.09999999999999998 < 0.1: without the slack p=2 would get no decode replica
    budget = Budget(per_hour=0.3, prices=(0.1, 0.1))
    assert [name for name, _, _ in _plan(budget)] == ["p1-d2", "p2-d1", "colocated-3"]


def test_a_gpu_budget_alone_keeps_the_old_names_and_costs_nothing() -> None:
    assert _plan(Budget(gpus=3)) == [("p1-d2", 3, None), ("p2-d1", 3, None),
                                     ("colocated-3", 3, None)]  # fmt: skip


def test_a_tp_degree_is_set_on_its_side_and_a_replica_of_tp_t_takes_t_gpus() -> None:
    splits = plan_splits(CONFIG, [], Budget(gpus=6, tp_prefill=(2,), tp_decode=(1,)))
    assert [(s.name, s.gpus) for s in splits] == [
        ("p1tp2-d4tp1", 6), ("p2tp2-d2tp1", 6), ("colocated-6tp1", 6)]  # fmt: skip
    cfg = load_config(CONFIG, list(splits[1].sets))
    groups = cfg.group_configs()
    assert [g.count for g in cfg.fleet.replicas] == [2, 2]  # type: ignore[union-attr]
    assert [g.parallel.tensor_parallel for g in groups] == [2, 1]


@pytest.mark.parametrize(
    ("budget", "field", "words"),
    [
        (Budget(per_hour=1.0, prices=(2.0, 2.0)), "--budget-per-hour", "fit no prefill replica"),
        (Budget(gpus=3, tp_prefill=(2,), tp_decode=(2,)), "--gpus", "fit no prefill replica"),
        (Budget(per_hour=10.0), "--budget-per-hour", "needs --price-per-gpu-hour"),
        (Budget(), "--budget-per-hour", "needs --gpus or --budget-per-hour"),
        (Budget(gpus=1), "--gpus", "expected 2..256 GPUs"),
        (Budget(per_hour=1000.0, prices=(1.0, 1.0)), "--budget-per-hour", "more than 256 GPUs"),
        (Budget(gpus=4, tp_prefill=(3,)), "--tp-prefill", "TP 3: group 0: parallel.tensor_"),
        (Budget(gpus=4, tp_decode=(1, 5)), "--tp-decode", "must divide the model's 32"),
    ],
)
def test_a_bad_budget_is_one_located_error(budget: Budget, field: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        plan_splits(CONFIG, [], budget)
    assert err.value.field == field and words in err.value.message
    assert not err.value.also


@pytest.mark.parametrize("text", ["0", "1,x", "2,2", "", "65", "1.5"])
def test_a_bad_tp_list_is_refused(text: str) -> None:
    with pytest.raises(InputError, match="--tp-decode"):
        parse_tp_list(text, "--tp-decode")


@pytest.mark.parametrize("text", ["0", "-1", "abc", "1,2,3", "nan", "inf", "2e6"])
def test_a_bad_price_is_refused(text: str) -> None:
    with pytest.raises(InputError, match="--price-per-gpu-hour"):
        parse_prices(text)


def test_prices_name_both_sides_or_one_for_both() -> None:
    assert parse_prices("2.5") == (2.5, 2.5) and parse_prices("3,2") == (3.0, 2.0)
    assert parse_tp_list("1,2", "--tp-prefill") == (1, 2)
    check_budget(Budget(gpus=2))  # a GPU budget alone needs no price


@settings(max_examples=30, deadline=None)
@given(
    gpus=st.one_of(st.none(), st.integers(2, 40)),
    per_hour=st.one_of(st.none(), st.floats(1.0, 60.0)),
    prices=st.tuples(st.floats(0.5, 5.0), st.floats(0.5, 5.0)),
    tps=st.tuples(st.sampled_from([(1,), (2,), (1, 2), (4, 1)]),
                  st.sampled_from([(1,), (2,), (2, 1)])),
)  # fmt: skip
def test_every_split_fits_the_budget_and_no_side_could_grow(
    gpus: int | None, per_hour: float | None, prices: tuple[float, float],
    tps: tuple[tuple[int, ...], tuple[int, ...]],
) -> None:  # fmt: skip
    budget = Budget(gpus if per_hour is not None else gpus or 8, per_hour, prices, *tps)

    def fits(prefill_gpus: int, decode_gpus: int) -> bool:
        cost = prefill_gpus * prices[0] + decode_gpus * prices[1]
        return (budget.gpus is None or prefill_gpus + decode_gpus <= budget.gpus) and (
            per_hour is None or cost <= per_hour * (1 + 1e-9))  # fmt: skip

    try:
        splits = plan_splits(CONFIG, [], budget)
    except InputError as err:
        refusals = ("fit no prefill replica", "more than 256 GPUs", "splits planned, at most")
        assert any(words in err.message for words in refusals), err.message
        return
    for s in splits:
        p_gpus, d_gpus = s.prefill * s.tp_prefill, s.decode * s.tp_decode
        assert s.gpus == p_gpus + d_gpus and fits(p_gpus, d_gpus), s
        assert not fits(p_gpus, d_gpus + s.tp_decode), f"{s.name}: one more decode replica fits"
        assert s.cost_per_hour == pytest.approx(p_gpus * prices[0] + d_gpus * prices[1])
    for tp_p in tps[0]:
        for tp_d in tps[1]:
            found = [s.prefill for s in splits if s.prefill and (s.tp_prefill, s.tp_decode) ==
                     (tp_p, tp_d)]  # fmt: skip
            p_all = [p for p in range(1, 257) if fits(p * tp_p, tp_d)]
            assert found == p_all, (tp_p, tp_d)
