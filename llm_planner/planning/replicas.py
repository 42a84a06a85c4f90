"""The engine replicas a planner drives, and how their steps interleave in time.

One replica steps on the planner's clock, as a single engine always has: the planner admits,
the engine runs one iteration, the planner reads its tokens. Several replicas run side by side:
on a virtual clock each replica that is free starts its next iteration at `now` on a clock of
its own, and the planner takes the iteration that ends first, so replicas overlap in simulated
time exactly as separate machines would. Replicas that are Ray actors (engine/ray_replica.py)
run their iterations truly side by side: on a virtual clock as above, each iteration's time
measured where it ran; on the wall clock, the planner takes whichever ends first. A replica's
batch changes only between its iterations, as in any engine's scheduler.

An `EngineError` from an iteration is a fault a restart mends: the planner restarts that
replica and the others go on. Any other exception is a bug and goes up with its traceback.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass

from llm_planner.domain.clock import Clock, VirtualClock
from llm_planner.domain.decisions import DecisionTrace, Kind, Reason
from llm_planner.engine.base import Engine, EngineError, EngineStats, StepResult
from llm_planner.planning.generation import PlanGeneration
from llm_planner.sched.batch import prefill_to_join
from llm_planner.sched.placement import Candidate, ReplicaLoad, make_placement, slot_free_s
from llm_planner.sched.policies import Behaviour
from llm_planner.sched.queues import QueueEntry, QueueShare, ReadyQueue


@dataclass
class Replica:
    index: int
    engine: Engine
    clock: VirtualClock | None = None  # its own clock, when replicas overlap in simulated time
    pending: Future | None = None  # an iteration started, its tokens not yet read
    result: StepResult | None = None  # its tokens, known before they are read (simulated time)
    started_s: float = 0.0
    ends_s: float = 0.0

    @property
    def free(self) -> bool:
        """Between iterations: its batch may change."""
        return self.pending is None


@dataclass(frozen=True)
class StepEvent:
    """One replica's iteration ended: its tokens, or the error it raised (neither: the clock
    reached the next outside event first)."""

    replica: Replica
    result: StepResult | None
    error: EngineError | None
    elapsed_s: float  # the iteration's time on the replica's clock


class ReplicaSet:
    def __init__(self, engines: Sequence[Engine], virtual: bool = True, step_timeout_s: float = math.inf) -> None:
        """`engines`: one, on the planner's clock, or several. `virtual`: several replicas
        overlap in simulated time, each on a fresh virtual clock of its own (given here, so
        that it can start its iterations at any simulated time); otherwise they run on the
        wall clock (Ray actors, engine/ray_replica.py), and one whose iteration takes longer
        than `step_timeout_s` is reported as hung."""
        if not engines:
            raise ValueError("at least one engine replica is needed")
        self.replicas = [Replica(i, e) for i, e in enumerate(engines)]
        self.virtual = virtual
        self.step_timeout_s = step_timeout_s
        if len(engines) > 1 and virtual:
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
                if replica.clock is not None:
                    replica.clock.advance_to(now)
                replica.started_s = now
                replica.pending = replica.engine.start_step()
        busy = [r for r in self.replicas if not r.free]
        if not busy:
            return None
        if self.virtual:
            return self._first_in_simulated_time(busy, clock, now, until_s)
        return self._first_on_wall_clock(busy, clock, until_s)

    @staticmethod
    def _failed(replica: Replica, exc: EngineError, elapsed_s: float) -> StepEvent:
        """The planner restarts this replica; the others go on."""
        replica.pending = replica.result = None
        return StepEvent(replica, None, exc, elapsed_s)

    def _first_in_simulated_time(self, busy: list[Replica], clock: Clock, now: float, until_s: float) -> StepEvent:
        for replica in busy:
            if replica.result is None:
                assert replica.pending is not None and replica.clock is not None  # busy, on a clock of its own
                try:
                    replica.result = replica.engine.end_step(replica.pending)
                except EngineError as exc:
                    return self._failed(replica, exc, replica.clock.now() - now)
                replica.ends_s = replica.clock.now()
        first = min(busy, key=lambda r: (r.ends_s, r.index))
        if first.ends_s > until_s:
            clock.advance_to(until_s)
            return StepEvent(first, None, None, 0.0)
        clock.advance_to(first.ends_s)
        result, first.result, first.pending = first.result, None, None
        return StepEvent(first, result, None, first.ends_s - first.started_s)

    def _first_on_wall_clock(self, busy: list[Replica], clock: Clock, until_s: float) -> StepEvent:
        oldest = min(busy, key=lambda r: r.started_s)
        wait_s = min(until_s, oldest.started_s + self.step_timeout_s) - clock.now()
        pending = [r.pending for r in busy if r.pending is not None]  # busy: every one
        done, _ = futures.wait(pending, timeout=max(0.0, wait_s), return_when=futures.FIRST_COMPLETED)
        now = clock.now()
        if not done:
            if now - oldest.started_s >= self.step_timeout_s:
                return self._failed(
                    oldest,
                    EngineError(
                        f"engine replica {oldest.index} did not end an iteration within {self.step_timeout_s:g} s"
                    ),
                    now - oldest.started_s,
                )
            return StepEvent(oldest, None, None, 0.0)
        first = min((r for r in busy if r.pending in done), key=lambda r: r.index)
        assert first.pending is not None
        try:
            result = first.engine.end_step(first.pending, timeout_s=0.0)
        except EngineError as exc:
            return self._failed(first, exc, now - first.started_s)
        first.pending = None
        return StepEvent(first, result, None, now - first.started_s)

    @staticmethod
    def _step_alone(replica: Replica, clock: Clock) -> StepEvent | None:
        if not replica.engine.running:
            return None
        started = clock.now()
        try:
            result = replica.engine.step()
        except EngineError as exc:
            return StepEvent(replica, None, exc, clock.now() - started)
        return StepEvent(replica, result, None, clock.now() - started)

    @property
    def stats(self) -> EngineStats:
        """All replicas' counts together (one replica: its own): sums, the largest batch, and
        the per-generation counts and samples of each."""
        every = [r.engine.stats for r in self.replicas]
        if len(every) == 1:
            return every[0]
        total = type(every[0])()
        for stats in every:
            for f in dataclasses.fields(stats):
                mine, theirs = getattr(total, f.name), getattr(stats, f.name)
                if f.name == "max_batch":
                    total.max_batch = max(mine, theirs)
                elif isinstance(mine, dict):
                    mine.update(theirs)
                elif isinstance(mine, list):
                    mine.extend(theirs)
                else:
                    setattr(total, f.name, mine + theirs)
        return total


class Placing:
    """Which replica each generation runs on, with several: the placement policy
    (sched/placement.py) at arrival or at admission, the moves of suspended generations, and
    each replica's share of the ready queue. With one replica everything runs there."""

    def __init__(
        self,
        replicas: ReplicaSet,
        placement_name: str,
        queue: ReadyQueue,
        behaviour: Behaviour,
        max_batch: int,
        gens: Mapping[str, PlanGeneration],
        decisions: DecisionTrace | None,
        clock: Clock,
    ) -> None:
        """`gens`: the planner's generations by task id (read, never changed here)."""
        self.replicas = replicas
        self.placement_name = placement_name
        self.placement = make_placement(placement_name)
        self.queue = queue
        self.behaviour = behaviour
        self.max_batch = max_batch
        self.gens = gens
        self.decisions = decisions
        self.clock = clock

    def at_arrival(self, gen: PlanGeneration, now: float) -> None:
        """Placed now, if the placement policy places at arrival."""
        if len(self.replicas) > 1 and self.placement.at_arrival:
            loads = [self._load(r, now) for r in self.replicas]
            self.place(gen, self.placement.choose(self._candidate(gen, now), loads))

    def shares(self, now: float) -> list[QueueShare]:
        """The queue split among the replicas, in its order: a generation placed on a replica
        waits for it; the others go where the placement policy puts them now."""
        loads = [self._load(r, now) for r in self.replicas]
        shares: list[list[QueueEntry]] = [[] for _ in self.replicas]
        resumed_ahead = [0] * len(self.replicas)  # suspended generations ahead in the queue, per replica
        for entry in self.queue.in_order(now):
            gen = self.gens[entry.gen_id]
            if gen.replica is None:
                candidate = self._candidate(gen, now)
                index = self.placement.choose(candidate, loads)
                loads[index].take(candidate)
            else:
                index = self._moved_to(gen, loads, resumed_ahead[gen.replica], now)
                if index == gen.replica:
                    resumed_ahead[index] += 1
            shares[index].append(entry)
        return [QueueShare(self.queue, entries) for entries in shares]

    def _moved_to(self, gen: PlanGeneration, loads: list[ReplicaLoad], ahead: int, now: float) -> int:
        """The replica a suspended generation goes on in: its own, or where the placement moves
        it (planned here, carried out if that replica admits it)."""
        home = gen.replica
        assert home is not None  # asked of placed generations only
        if not (gen.in_engine and self.placement.moves):
            return home
        stay = dataclasses.replace(self._candidate(gen, now), prompt_tokens=0)
        moved = dataclasses.replace(stay, prompt_tokens=prefill_to_join(self.replicas[0].engine, gen))
        here = dataclasses.replace(loads[home], waiting=ahead, placed=list(loads[home].placed))
        target = self.placement.move(stay, here, moved, loads)
        if target is None:
            return home
        loads[target].take(moved)
        return target

    def _candidate(self, gen: PlanGeneration, now: float) -> Candidate:
        return Candidate(
            gen.task_id,
            self.replicas[0].engine.prompt_tokens(gen.request),
            gen.expected_segment_tokens,
            gen.plan_tokens_left,
            self.queue.priority(gen.entry, now) if gen.entry else 0.0,
        )

    def place(self, gen: PlanGeneration, index: int) -> None:
        gen.replica = index
        self.placement.placed(index)
        if self.decisions is not None and len(self.replicas) > 1:
            self.decisions.record(
                self.clock.now(),
                gen.task_id,
                Kind.PLACED,
                Reason.PLACEMENT,
                replica=index,
                placement=self.placement_name,
            )

    def _load(self, replica: Replica, now: float) -> ReplicaLoad:
        engine = replica.engine
        placed = [g for g in self.gens.values() if g.replica == replica.index]
        running = [self.gens[g] for g in engine.running if g in self.gens]
        # A generation that stays in the batch between segments leaves it when its plan ends.
        left = [g.segment_tokens_left if self.behaviour.pauses_after_segment else g.plan_tokens_left for g in running]
        preemptible = (
            [self.queue.priority(g.entry, now) for g in running if g.entry is not None]
            if self.behaviour.preemptive
            else []
        )
        return ReplicaLoad(
            replica.index,
            engine,
            self.max_batch,
            len(running),
            sum(engine.context_tokens(g.task_id) for g in running),
            sum(1 for g in placed if g.task_id in self.queue),
            sum(g.plan_tokens_left for g in placed),
            slot_free_s(engine, left),
            preemptible,
        )
