"""How many of a prompt's tokens a vLLM engine's prefix cache already holds, mirrored from
the prompts the engine was given.

vLLM keeps a prompt's KV in full blocks, each found by its tokens and every token before it,
and computes only what no cached block covers. A prompt after its skill set's system prompt
prefills from that prefix's last partial block on; a prompt that repeats an earlier one (a
fleet's recurring task, a replayed workload's repeated bursts) prefills only its own last
partial block. Counted by its text alone, its first iteration looks dearer than it is, and a
queued alert later than it will be. The mirror forgets the least recently used blocks beyond
the engine's KV space, as vLLM evicts them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence


class PrefixBlocks:
    def __init__(self, block_size: int, capacity_blocks: int) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be positive, not {block_size}")
        self.block_size = block_size
        self.capacity_blocks = max(1, capacity_blocks)
        self._blocks: OrderedDict[int, None] = OrderedDict()  # least recently used first

    def _keys(self, ids: Sequence[int]) -> Iterator[int]:
        """One key per full block, chained: a block matches only after the same tokens."""
        key = 0
        for end in range(self.block_size, len(ids) + 1, self.block_size):
            key = hash((key, tuple(ids[end - self.block_size : end])))
            yield key

    def cached_tokens(self, ids: Sequence[int]) -> int:
        """The leading tokens of `ids` held in cached blocks; never the last token, which vLLM
        always computes (its logits give the first output token)."""
        hits = 0
        for key in self._keys(ids):
            if key not in self._blocks:
                break
            hits += 1
        return min(hits, max(0, len(ids) - 1) // self.block_size) * self.block_size

    def add(self, ids: Sequence[int]) -> None:
        """A prompt goes into the engine: its full blocks are cached once it is prefilled."""
        for key in self._keys(ids):
            self._blocks[key] = None
            self._blocks.move_to_end(key)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)

    def clear(self) -> None:
        self._blocks.clear()
