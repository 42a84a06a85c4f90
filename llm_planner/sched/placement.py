"""Placement: which engine replica a generation joins when it first enters an engine.

The ready queue stays global; each replica has its own batch controller and KV cache. A
generation stays on the replica it is placed on (its context, the prefix cache of its prompt
and plan so far, is there) unless the placement moves it; it waits in the global queue, in the
queue's order, for a place in that replica's batch. Policies:

- `round-robin`: the replicas in turn, as a task arrives (as a load balancer routes requests);
- `least-tokens` (Mico): as a task arrives, the replica with the fewest predicted tokens still
  to write for the generations placed on it (the predictor's plan lengths; without one, the
  next segment's l_max);
- `deadline`: placed only when a replica could admit it, in the queue's priority order: the
  replica where its next segment is predicted to end first, from that replica's batch, context
  and step-time profile (a full batch adds the wait for its first slot to come free). A
  suspended generation moves to another replica when its next segment is predicted to end
  sooner there, its prompt and plan so far prefilled again included, than on its own replica.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from llm_planner.engine.base import Engine


@dataclass(frozen=True)
class Candidate:
    """What placement reads of a generation that is not yet in an engine."""

    gen_id: str
    prompt_tokens: int  # to prefill (its own prompt; the skill set's shared prompt is cached)
    segment_tokens: float  # its next segment's expected tokens
    plan_tokens_left: float  # domain/tokens_left.py
    priority: float = 0.0  # its priority in the ready queue now


@dataclass
class ReplicaLoad:
    """One replica as placement sees it during one admission decision."""

    index: int
    engine: Engine
    max_batch: int
    running: int  # generations in its batch
    context_tokens: int  # attended by its batch
    waiting: int  # its generations suspended in the queue (they come back to it)
    outstanding_tokens: float  # predicted tokens its generations still have to write
    slot_free_s: float  # predicted time until a place in its batch comes free (a full batch)
    # queue priorities of its running generations that a better one may preempt (none: the
    # policy does not preempt)
    preemptible: list[float] = field(default_factory=list)
    placed: list[Candidate] = field(default_factory=list)  # placed on it in this decision
    preempting: int = 0  # of those, how many take a running generation's place

    @property
    def batch(self) -> int:
        return self.running + self.waiting + len(self.placed)

    @property
    def tokens(self) -> float:
        return self.outstanding_tokens + sum(c.plan_tokens_left for c in self.placed)

    def _preempts(self, candidate: Candidate) -> bool:
        """A full batch, and a running generation it would take the place of."""
        return sum(p < candidate.priority for p in self.preemptible) > self.preempting

    def segment_end_s(self, candidate: Candidate) -> float:
        """Predicted time from now until the candidate's next segment ends on this replica."""
        full = self.batch >= self.max_batch
        batch = min(self.batch, self.max_batch - 1) + 1
        context = self.context_tokens + sum(c.prompt_tokens for c in self.placed) + candidate.prompt_tokens
        step = self.engine.predict_step_s(batch, context)
        first = self.engine.predict_step_s(batch, context, candidate.prompt_tokens)
        wait = self.slot_free_s if full and not self._preempts(candidate) else 0.0
        return wait + first + max(0.0, candidate.segment_tokens - 1) * step

    def take(self, candidate: Candidate) -> None:
        """The candidate is placed here (for the rest of this decision)."""
        if self.batch >= self.max_batch and self._preempts(candidate):
            self.preempting += 1
        self.placed.append(candidate)


class Placement(ABC):
    name: ClassVar[str]
    at_arrival: ClassVar[bool]  # placed when the task arrives (else when a replica could admit it)
    moves: ClassVar[bool] = False  # may move a suspended generation to another replica

    @abstractmethod
    def choose(self, candidate: Candidate, replicas: list[ReplicaLoad]) -> int:
        """The index of the replica the candidate should join."""

    def placed(self, index: int) -> None:  # noqa: B027 -- optional: most placements keep no state
        """A generation was placed on replica `index`."""

    def move(self, stay: Candidate, home: ReplicaLoad, moved: Candidate, replicas: list[ReplicaLoad]) -> int | None:
        """Where a suspended generation should go on: None to stay on `home`, which holds its
        context (`stay`: resumed there), else the replica it should move to (`moved`: its
        prompt and plan so far prefilled there)."""
        return None


class RoundRobin(Placement):
    name = "round-robin"
    at_arrival = True

    def __init__(self) -> None:
        self._next = 0

    def choose(self, candidate: Candidate, replicas: list[ReplicaLoad]) -> int:
        return self._next % len(replicas)

    def placed(self, index: int) -> None:
        self._next = index + 1


class LeastTokens(Placement):
    name = "least-tokens"
    at_arrival = True

    def choose(self, candidate: Candidate, replicas: list[ReplicaLoad]) -> int:
        return min(replicas, key=lambda r: (r.tokens, r.index)).index


class Deadline(Placement):
    name = "deadline"
    at_arrival = False
    moves = True

    def choose(self, candidate: Candidate, replicas: list[ReplicaLoad]) -> int:
        return min(replicas, key=lambda r: (r.segment_end_s(candidate), r.tokens, r.index)).index

    def move(self, stay: Candidate, home: ReplicaLoad, moved: Candidate, replicas: list[ReplicaLoad]) -> int | None:
        others = [r for r in replicas if r.index != home.index]
        best = min(others, key=lambda r: (r.segment_end_s(moved), r.index))
        return best.index if best.segment_end_s(moved) < home.segment_end_s(stay) else None


PLACEMENTS: dict[str, type[Placement]] = {p.name: p for p in (RoundRobin, LeastTokens, Deadline)}


def make_placement(name: str) -> Placement:
    try:
        return PLACEMENTS[name]()
    except KeyError:
        raise ValueError(f"unknown placement {name!r} (choose from {', '.join(PLACEMENTS)})") from None


def slot_free_s(engine: Engine, tokens_left: list[float]) -> float:
    """Until the first running generation leaves the batch (`tokens_left`: what each has to
    write before it does), at the running batch's step time."""
    if not tokens_left:
        return 0.0
    running = engine.running
    step = engine.predict_step_s(len(running), sum(engine.context_tokens(g) for g in running))
    return min(tokens_left) * step if math.isfinite(step) else 0.0
