"""Exercise 3 of the seed notebook, with hand-computed block counts (block size 16)."""

from __future__ import annotations

import pytest

from simkv.analysis.forks import ForkCount, tree_of_thought_blocks


@pytest.mark.parametrize("mode", ["lazy", "eager"])
def test_partial_prompt_block_is_copied_once_per_child(mode: str) -> None:
    # Parent: 100 tokens = 6 full blocks + 1 partial (4 tokens). Each child (150 tokens, 10
    # blocks) shares the 6 full blocks and owns 4: its copy of the partial one + 3 new.
    # 7 (parent) + 10 * 4 = 47 vs 10 * 10 = 100 independent; 10 copies in both modes.
    count = tree_of_thought_blocks(100, 0, 50, children=10, block_size=16, mode=mode)
    assert count == ForkCount(forked_blocks=47, independent_blocks=100, copies=10)
    assert count.saving == pytest.approx(0.53)


def test_lazy_fork_saves_a_copy_when_the_parent_goes_away() -> None:
    # Parent freed at the fork: 9 children copy the partial block, the 10th finds it unshared
    # and writes in place: 6 shared + 9 * 4 + (1 + 3) = 46 blocks, 9 copies.
    lazy = tree_of_thought_blocks(100, 0, 50, mode="lazy", keep_parent=False)
    assert lazy == ForkCount(46, 100, 9)
    # Eager copies for every child at the fork; the parent's partial block is then freed.
    eager = tree_of_thought_blocks(100, 0, 50, mode="eager", keep_parent=False)
    assert eager == ForkCount(46, 100, 10)


def test_children_that_write_nothing() -> None:
    # 30 tokens: 1 full + 1 partial block. Lazy shares both (2 blocks, no copy); eager gives
    # each child its own partial block: 2 + 10 = 12 blocks, 10 copies. Independent: 10 * 2.
    assert tree_of_thought_blocks(20, 10, 0, mode="lazy") == ForkCount(2, 20, 0)
    assert tree_of_thought_blocks(20, 10, 0, mode="eager") == ForkCount(12, 20, 10)


@pytest.mark.parametrize("mode", ["lazy", "eager"])
def test_block_aligned_parent_needs_no_copy(mode: str) -> None:
    # Parent 48 + 16 = 64 tokens = 4 full blocks; children 114 tokens = 8 blocks, 4 own each.
    assert tree_of_thought_blocks(48, 16, 50, children=3, mode=mode) == ForkCount(16, 24, 0)


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="children"):
        tree_of_thought_blocks(10, 0, 5, children=0)
    with pytest.raises(ValueError, match=">= 0"):
        tree_of_thought_blocks(10, -1, 5)
