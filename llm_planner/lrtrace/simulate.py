"""Discrete-event simulation of a workload: the real planner core (scheduler, batch
controller, segmenter, exec models) on a virtual clock with the `sim` engine and simulated
robots. Events (task arrivals, robot reports) are delivered between engine iterations, as
the live node delivers ROS callbacks."""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass
from typing import Callable

from tokenizers import Tokenizer

from ..clock import VirtualClock
from ..config import PlannerConfig
from ..engine import EngineStats, SimEngine, load_engine_profile
from ..planner import Planner
from ..robots import CallTimeSource, SimRobots
from ..scheduler import get_policy
from ..tasks import StatusUpdate, TaskRecord, TaskRequest
from ..tokenizer import load_tokenizer
from ..tuf import Tuf
from .formats import Job, Trace, TraceSet, Workload


class EventQueue:
    def __init__(self) -> None:
        self._heap: list = []
        self._seq = itertools.count()

    def push(self, t: float, callback: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), callback))

    def __len__(self) -> int:
        return len(self._heap)

    def next_time(self) -> float:
        return self._heap[0][0]

    def pop(self) -> Callable[[], None]:
        return heapq.heappop(self._heap)[2]


@dataclass
class SimulationResult:
    policy: str
    seed: int
    workload: str
    records: list[TaskRecord]
    engine_stats: EngineStats
    simulated_s: float
    wall_s: float
    statuses: int
    deferred_admissions: int


def job_request(job: Job, trace: Trace, config: PlannerConfig) -> TaskRequest:
    """A job as the planner receives it: the level by name, the TUF from job, trace or level."""
    triple = job.tuf or trace.tuf
    if triple is not None:
        tuf = Tuf(*triple)
        level = config.level_for_tuf(tuf) or trace.urgency
    else:
        level = trace.urgency
        tuf = config.level(level).tuf
    return TaskRequest(
        task_id=f"job{job.job_id}",
        robot_id=f"agent{job.agent:02d}",
        robot_type=trace.robot_type,
        instruction=trace.instruction,
        level=level,
        tuf=tuf,
        arrival_s=job.arrival_s,
        forced_plan=trace.plan or None,
        label=trace.name,
    )


def check_workload(workload: Workload, traces: TraceSet, config: PlannerConfig) -> dict[int, Trace]:
    by_id = traces.by_id()
    missing = sorted({j.trace_id for j in workload.jobs if j.trace_id not in by_id})
    if missing:
        raise ValueError(f"workload {workload.name} uses trace ids {missing} that trace set {traces.name} lacks")
    unknown = sorted({by_id[j.trace_id].robot_type for j in workload.jobs} - set(config.robot_types))
    if unknown:
        raise ValueError(f"robot types {unknown} are not configured (config robot_types: {sorted(config.robot_types)})")
    return by_id


def simulate(workload: Workload, traces: TraceSet, policy: str, config: PlannerConfig, seed: int,
             tokenizer: Tokenizer | None = None, progress: Callable[[float], None] | None = None,
             on_status: Callable[[StatusUpdate], None] | None = None) -> SimulationResult:
    """Run the whole workload to the end; every task ends in a terminal state."""
    by_id = check_workload(workload, traces, config)
    wall0 = time.perf_counter()
    clock = VirtualClock()
    events = EventQueue()
    engine = SimEngine(load_engine_profile(config.engine_profile), tokenizer or load_tokenizer(config.tokenizer), clock)
    times = CallTimeSource(seed)
    planner: Planner | None = None
    robots = SimRobots(events.push, clock.now, times, lambda task_id: planner.robot_models(task_id))
    statuses = 0

    def count_status(update: StatusUpdate) -> None:
        nonlocal statuses
        statuses += 1
        if on_status is not None:
            on_status(update)

    planner = Planner(config, get_policy(policy), engine, clock, robots, count_status)
    robots.attach(planner)
    for job in workload.jobs:
        request = job_request(job, by_id[job.trace_id], config)
        if job.exec_times_s:
            times.set_recorded(request.task_id, job.exec_times_s)
        events.push(job.arrival_s, lambda r=request: planner.submit(r))

    last_report = 0.0
    while True:
        while events and events.next_time() <= clock.now():
            events.pop()()
        if planner.step():
            pass
        elif events:
            clock.advance_to(events.next_time())
        else:
            break
        if progress is not None and clock.now() - last_report >= 1.0:
            last_report = clock.now()
            progress(clock.now())
    if planner.active_tasks:
        raise RuntimeError(f"simulation ended with {planner.active_tasks} unfinished tasks")
    return SimulationResult(policy, seed, workload.name, list(planner.records.values()), engine.stats,
                            clock.now(), time.perf_counter() - wall0, statuses, planner.batch.deferred)


def planned_units(records: list[TaskRecord], config: PlannerConfig) -> dict[str, int]:
    """Utility units of each task's recorded plan (segments with a skill call), so that a task
    that did not finish still counts with its whole plan in the maximum utility."""
    from ..segmenter import split_segments
    from ..skills import load_skill_set

    out = {}
    for r in records:
        plan = r.request.forced_plan
        if plan and r.request.robot_type in config.robot_types:
            skill_set = load_skill_set(config.robot_type(r.request.robot_type).skill_set)
            out[r.request.task_id] = sum(1 for s in split_segments(skill_set, plan) if s.calls) or 1
    return out
