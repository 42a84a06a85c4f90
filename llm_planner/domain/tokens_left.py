"""Tokens left: the scheduler's estimates of what a generation still has to write. Each
meaning has one name, used wherever it is read:

- `segment_tokens_left`: the segment being written, at its expected length, less what it has
  so far. The batch controller's rules (admission, keep-deadlines, shrinking) read it, rounded
  up to whole tokens; the replicas' "place free" estimate reads it under policies that pause
  generations after each segment. At its skill set's *typical* length (`typical_segment_tokens`,
  at most the expected) it is the importance guard's view: what the segment most likely needs.
- `plan_tokens_left`: the rest of the plan as the segment lengths predict it (every segment
  ahead), less what the current segment has so far. Placement on replicas reads it.
- `priced_plan_tokens_left`: rtlm only: the whole plan's predicted size, priced by the
  predictor's uncertainty (RT-LM), less every token written. rtlm's G and its batch
  consolidation read it.

Each is at least one token: a generation in the batch writes at least one more.
"""

from __future__ import annotations

from collections.abc import Sequence


def segment_tokens_left(segment_tokens: float, written_in_segment: int) -> float:
    return max(1.0, segment_tokens - written_in_segment)


def plan_tokens_left(ahead_tokens: Sequence[float], written_in_segment: int) -> float:
    """`ahead_tokens`: each segment's expected tokens, the current one first."""
    return max(1.0, sum(ahead_tokens) - written_in_segment)


def priced_plan_tokens_left(priced_plan_tokens: float, written: int) -> float:
    return max(1.0, priced_plan_tokens - written)
