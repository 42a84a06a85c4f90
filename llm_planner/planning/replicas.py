"""The engine replicas a planner drives, and how their steps interleave in time.

One replica steps on the planner's clock, as a single engine always has: the planner admits,
the engine runs one iteration, the planner reads its tokens. Several replicas run side by side:
on a virtual clock each replica that is free starts its next iteration at `now` on a clock of
its own, and the planner takes the iteration that ends first, so replicas overlap in simulated
time exactly as separate machines would. A replica's batch changes only between its
iterations, as in any engine's scheduler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from llm_planner.domain.clock import Clock, VirtualClock
from llm_planner.engine.base import Engine, EngineStats, StepResult


@dataclass
class Replica:
    index: int
    engine: Engine
    clock: VirtualClock | None = None  # its own clock, when replicas overlap in simulated time
    in_flight: StepResult | None = None  # an iteration started, its tokens not yet read
    started_s: float = 0.0
    ends_s: float = 0.0

    @property
    def free(self) -> bool:
        """Between iterations: its batch may change."""
        return self.in_flight is None


@dataclass(frozen=True)
class StepEvent:
    """One replica's iteration ended: its tokens, or the error it raised (neither: the clock
    reached the next outside event first)."""

    replica: Replica
    result: StepResult | None
    error: Exception | None
    elapsed_s: float  # the iteration's time on the replica's clock


class ReplicaSet:
    def __init__(self, engines: Sequence[Engine]) -> None:
        """`engines`: one, on the planner's clock, or several on virtual clocks (each gets a
        fresh one of its own here, so that it can start its iterations at any simulated time)."""
        if not engines:
            raise ValueError("at least one engine replica is needed")
        self.replicas = [Replica(i, e) for i, e in enumerate(engines)]
        if len(engines) > 1:
            for replica in self.replicas:
                replica.clock = VirtualClock()
                replica.engine.reset(replica.clock)

    def __len__(self) -> int:
        return len(self.replicas)

    def __iter__(self):
        return iter(self.replicas)

    def __getitem__(self, index: int) -> Replica:
        return self.replicas[index]

    @property
    def running(self) -> bool:
        return any(r.engine.running or not r.free for r in self.replicas)

    def step(self, clock: Clock, until_s: float = math.inf) -> StepEvent | None:
        """The next iteration to end, its tokens read at its end; None if no replica has
        work. With several replicas, the clock stops at `until_s` (the next outside event) if
        no iteration ends before it, and an event without a replica's result is returned."""
        if len(self.replicas) == 1:
            return self._step_alone(self.replicas[0], clock)
        now = clock.now()
        for replica in self.replicas:
            if replica.free and replica.engine.running:
                replica.clock.advance_to(now)
                replica.started_s = now
                try:
                    replica.in_flight = replica.engine.step()
                except Exception as exc:  # the planner restarts this replica; the others go on
                    return StepEvent(replica, None, exc, replica.clock.now() - now)
                replica.ends_s = replica.clock.now()
        busy = [r for r in self.replicas if not r.free]
        if not busy:
            return None
        first = min(busy, key=lambda r: (r.ends_s, r.index))
        if first.ends_s > until_s:
            clock.advance_to(until_s)
            return StepEvent(first, None, None, 0.0)
        clock.advance_to(first.ends_s)
        result, first.in_flight = first.in_flight, None
        return StepEvent(first, result, None, first.ends_s - first.started_s)

    @staticmethod
    def _step_alone(replica: Replica, clock: Clock) -> StepEvent | None:
        if not replica.engine.running:
            return None
        started = clock.now()
        try:
            result = replica.engine.step()
        except Exception as exc:
            return StepEvent(replica, None, exc, clock.now() - started)
        return StepEvent(replica, result, None, clock.now() - started)

    @property
    def stats(self) -> EngineStats:
        """All replicas' counts together (one replica: its own)."""
        if len(self.replicas) == 1:
            return self.replicas[0].engine.stats
        total = EngineStats()
        for r in self.replicas:
            s = r.engine.stats
            total.steps += s.steps
            total.busy_s += s.busy_s
            total.generated_tokens += s.generated_tokens
            total.prefill_tokens.update(s.prefill_tokens)
            total.prefix_prefill_tokens += s.prefix_prefill_tokens
            total.resumes.update(s.resumes)
            total.max_batch = max(total.max_batch, s.max_batch)
        return total
