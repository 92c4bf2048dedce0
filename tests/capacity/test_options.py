"""The cheapest fleet and the Pareto front among priced options (simkv.capacity.options)."""

from __future__ import annotations

from simkv.capacity.options import OptionRow, cheapest, dominates, pareto


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
