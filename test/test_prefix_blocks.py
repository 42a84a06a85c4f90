"""The mirror of vLLM's prefix cache that prices a prompt's prefill (engine/prefix_blocks.py)."""

import pytest

from llm_planner.engine.prefix_blocks import PrefixBlocks

BLOCK = 4


def test_only_full_blocks_after_the_same_tokens_are_cached():
    blocks = PrefixBlocks(BLOCK, capacity_blocks=100)
    system = list(range(10))  # two full blocks and a partial one
    blocks.add(system + [100, 101])
    assert blocks.cached_tokens(system + [200, 201, 202]) == 8  # the partial third block differs
    assert blocks.cached_tokens([0, 1, 2, 9] + system[4:]) == 0  # a later block after other tokens
    assert blocks.cached_tokens([5, 6]) == 0


def test_a_repeated_prompt_prefills_its_last_partial_block_and_never_nothing():
    blocks = PrefixBlocks(BLOCK, capacity_blocks=100)
    prompt, whole_blocks = list(range(11)), list(range(12))
    blocks.add(prompt)
    blocks.add(whole_blocks)
    assert blocks.cached_tokens(prompt) == 8  # 3 of 11 tokens computed
    assert blocks.cached_tokens(whole_blocks) == 8  # the last token is always computed: its whole block


def test_the_least_recently_used_blocks_are_forgotten_beyond_the_capacity():
    blocks = PrefixBlocks(BLOCK, capacity_blocks=2)
    old, new = [1] * 8, [2] * 8
    blocks.add(old + [0])
    blocks.add(new + [0])
    assert blocks.cached_tokens(old + [0]) == 0
    assert blocks.cached_tokens(new + [0]) == 8
    blocks.clear()
    assert blocks.cached_tokens(new + [0]) == 0


def test_a_block_size_must_be_positive():
    with pytest.raises(ValueError, match="block_size"):
        PrefixBlocks(0, capacity_blocks=1)
