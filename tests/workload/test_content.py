import numpy as np
import pytest

from simkv.workload.content import PromptContent, UniqueKeys, block_keys


def shared_blocks(
    a: list[tuple[int, int]], out_a: int, b: list[tuple[int, int]], out_b: int, bs: int
):
    """Number of equal leading block keys of two sequences (prompt + generated tokens)."""
    n = (sum(length for _, length in a) + sum(length for _, length in b)) // bs + 2
    keys_a, keys_b = block_keys(a, out_a, bs, n), block_keys(b, out_b, bs, n)
    return next((j for j, (x, y) in enumerate(zip(keys_a, keys_b, strict=True)) if x != y), n)


def test_from_lists_is_csr_with_prompt_sums():
    c = PromptContent.from_lists([[(7, 3), (8, 2)], [(7, 3)]], [9, 10])
    assert c.seg_ids.tolist() == [7, 8, 7]
    assert c.seg_lens.tolist() == [3, 2, 3]
    assert c.offsets.tolist() == [0, 2, 3]
    assert c.output_ids.tolist() == [9, 10]
    assert len(c) == 2
    assert c.segments(0) == [(7, 3), (8, 2)]
    assert c.segments(1) == [(7, 3)]
    assert c.prompt_tokens().tolist() == [5, 3]


def test_invalid_columns_raise():
    with pytest.raises(ValueError, match="at least one token"):
        PromptContent.from_lists([[(1, 0)]], [2])
    with pytest.raises(ValueError, match="inconsistent lengths"):
        PromptContent.from_lists([[(1, 1)]], [2, 3])
    with pytest.raises(ValueError, match="non-decreasing"):
        PromptContent(np.array([1]), np.array([1]), np.array([0, 1, 0]), np.array([5, 6]))


def test_block_keys_cover_prompt_then_output():
    # tokens: 7 7 7 8 8 | output 9 9 9 ...; blocks of 2: [77][78][89][99]
    keys = block_keys([(7, 3), (8, 2)], 9, 2, 4)
    assert len(keys) == 4
    assert len(set(keys)) == 4
    other = block_keys([(7, 3), (5, 2)], 9, 2, 4)  # differs from token 3 on (block 1)
    assert other[0] == keys[0]
    assert other[1:] != keys[1:] and all(x != y for x, y in zip(other[1:], keys[1:], strict=True))
    assert block_keys([(7, 3), (8, 2)], 9, 2, 2) == keys[:2]


def test_keys_are_chained_not_per_block():
    # block 1 holds the same pieces (segment 2, tokens 0..4) but follows different content
    a = block_keys([(1, 4), (2, 4)], 10, 4, 2)
    b = block_keys([(3, 4), (2, 4)], 11, 4, 2)
    assert a[0] != b[0] and a[1] != b[1]


@pytest.mark.parametrize(("bs", "shared"), [(1, 1005), (16, 62), (512, 1)])
def test_shared_count_is_floor_of_common_tokens(bs, shared):
    # common: 1000 tokens of segment 0, then 5 tokens of segment 1; then 6 vs 2 diverge
    a = [(0, 1000), (1, 5), (6, 40)]
    b = [(0, 1000), (1, 5), (2, 40)]
    assert shared_blocks(a, 3, b, 4, bs) == shared


def test_same_id_different_length_diverges_after_the_shorter():
    # 3 tokens of segment 5 in both; then one continues segment 5, the other starts output 9
    assert shared_blocks([(5, 3)], 9, [(5, 8)], 10, 1) == 3
    assert shared_blocks([(5, 3)], 9, [(5, 8)], 10, 2) == 1


def test_unique_keys_are_negative_and_never_meet_content_keys():
    keys = UniqueKeys(3)
    assert list(keys.extend(2)[:2]) == [-(3 << 32) - 1, -(3 << 32) - 2]
    assert keys.extend(1) == keys.keys and len(keys.extend(5)) >= 5  # every key, at once
    mine, next_ones = keys.keys, UniqueKeys(4).keys  # 2**32 keys each, disjoint ranges
    assert mine[-1] > next_ones[0] and len(mine) == 1 << 32
    content = block_keys([(1, 64)], 2, 16, 4)
    assert all(key >= 0 for key in content) and all(key < 0 for key in (mine[0], mine[-1]))
