"""The cheapest fleet and the Pareto front among priced options (simkv.capacity.options)."""

from __future__ import annotations

import pytest

from simkv.capacity.options import OptionRow, cheapest, dominates, pareto, row_record


def test_cost_is_replicas_times_tp_times_price() -> None:
    """Hand-computed: 3 replicas at TP2 are 6 GPUs; at 2.5 per GPU-hour, 15 per hour."""
    row = OptionRow("a100-tp2", 2.5, 2, 3, 10.0, 100.0, 20.0)
    assert (row.gpus, row.cost_per_hour) == (6, 15.0)
    assert OptionRow("none", 2.5, 2, None).cost_per_hour is None


def test_the_cheapest_and_its_ties() -> None:
    """4 × TP1 at 2.0 (8.0/h), 2 × TP1 at 3.5 (7.0/h), 2 × TP2 at 2.0 (8.0/h): the H100s.
    At equal cost the fleet of fewer GPUs wins, then the earlier option."""
    rows = [
        OptionRow("a100-tp1", 2.0, 1, 4, 9.0, 96.0, 27.0),
        OptionRow("h100-tp1", 3.5, 1, 2, 10.0, 42.0, 17.0),
        OptionRow("a100-tp2", 2.0, 2, 2, 9.0, 131.0, 31.0),
    ]
    assert cheapest(rows) is rows[1]
    same_cost = [OptionRow("four", 2.0, 1, 4), OptionRow("two", 4.0, 1, 2)]
    assert cheapest(same_cost) is same_cost[1]
    twins = [OptionRow("first", 2.0, 1, 2), OptionRow("second", 2.0, 1, 2)]
    assert cheapest(twins) is twins[0]
    assert cheapest([OptionRow("none", 1.0, 1, None)]) is None


def test_the_pareto_front() -> None:
    """cheap (8/h, 200 ms) and fast (16/h, 50 ms) trade cost for latency: both on the front;
    worse (16/h, 200 ms) is dominated by cheap; an unanswered option is never on it."""
    cheap = OptionRow("cheap", 2.0, 1, 4, 10.0, 200.0, 30.0)
    fast = OptionRow("fast", 4.0, 1, 4, 10.0, 50.0, 30.0)
    worse = OptionRow("worse", 4.0, 1, 4, 10.0, 200.0, 30.0)
    none = OptionRow("none", 1.0, 1, None)
    assert dominates(cheap, worse) and not dominates(cheap, fast)
    assert not dominates(cheap, cheap)
    assert pareto([cheap, fast, worse, none]) == [True, True, False, False]


def test_the_planners_units_by_hand() -> None:
    """2 replicas × TP2 at 3.5 per GPU-hour: 4 GPUs, 14.0 per hour. 1,000 output tokens/s are
    3.6 M per hour, so a million cost 14 / 3.6 = 3.89; 5,000 tokens/s in all: 14 / 18 = 0.78.
    10 req/s: 2.5 per GPU, 10 / 14 = 0.714 per unit of cost per hour. The busiest replica busy
    80 % of the time leaves 20 %; TPOT's margin (25 %) is below TTFT's (50 %): TPOT binds."""
    row = OptionRow("h100-tp2", 3.5, 2, 2, 10.0, 100.0, 30.0, currency="EUR",
                    output_throughput=1000.0, total_token_throughput=5000.0, mfu_frac=0.3,
                    max_busy_frac=0.8, slo_margins=(("ttft", 0.5), ("tpot", 0.25)))  # fmt: skip
    assert row.cost_per_hour == 14.0
    assert row.cost_per_m_output_tokens == pytest.approx(14.0 / 3.6)
    assert row.cost_per_m_total_tokens == pytest.approx(14.0 / 18.0)
    assert row.requests_per_gpu == pytest.approx(2.5)
    assert row.requests_per_cost == pytest.approx(10.0 / 14.0)
    assert row.busy_headroom_frac == pytest.approx(0.2)
    assert row.binding_slo == "tpot"
    record = row_record(row)
    assert record["slo_margins"] == {"ttft": 0.5, "tpot": 0.25}
    assert record["cost_per_m_output_tokens"] == pytest.approx(3.8889, rel=1e-4)


def test_units_without_their_inputs_are_none() -> None:
    """No throughput, no busy share, no margins: no unit is made up (and none divides by 0)."""
    row = OptionRow("x", 2.0, 1, 1, 0.0)
    assert row.cost_per_m_output_tokens is None and row.cost_per_m_total_tokens is None
    assert row.requests_per_gpu == 0.0 and row.busy_headroom_frac is None
    assert row.binding_slo is None
    assert OptionRow("none", 2.0, 1, None).requests_per_cost is None
