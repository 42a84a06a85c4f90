"""The planner's view of robots, and simulated robots for the discrete-event simulation.

A robot executes one task's segments strictly in the order they are dispatched; a segment
that arrives while the robot is busy waits in its queue. Robots report back through the
planner's `segment_started` / `segment_finished`.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Protocol

import numpy as np

from llm_planner.catalog.exec_model import ExecModel
from llm_planner.catalog.skills import SkillSet
from llm_planner.domain.tasks import DispatchedSegment


class RobotPort(Protocol):
    def dispatch(self, robot_id: str, task_id: str, segment: DispatchedSegment) -> None: ...

    def cancel(self, robot_id: str, task_id: str) -> None: ...


class CallTimeSource:
    """Execution time of each call of a task, in plan order: the recorded times where the job
    has them, otherwise drawn from the exec model with a generator seeded by (seed, task), so
    every policy simulated with the same seed sees the same robot."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._recorded: dict[str, list[float]] = {}
        self._consumed: dict[str, int] = {}
        self._rngs: dict[str, np.random.Generator] = {}

    def set_recorded(self, task_id: str, seconds: list[float]) -> None:
        self._recorded[task_id] = list(seconds)

    def _rng(self, task_id: str) -> np.random.Generator:
        rng = self._rngs.get(task_id)
        if rng is None:
            digest = hashlib.sha256(f"{self.seed}/{task_id}".encode()).digest()
            rng = self._rngs[task_id] = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        return rng

    def times(self, task_id: str, segment: DispatchedSegment, model: ExecModel) -> list[float]:
        recorded = self._recorded.get(task_id, [])
        out = []
        for call in segment.calls:
            i = self._consumed.get(task_id, 0)
            self._consumed[task_id] = i + 1
            out.append(recorded[i] if i < len(recorded) else model.sample(call, self._rng(task_id)))
        return out


Schedule = Callable[[float, Callable[[], None]], None]


class SimRobots:
    """Simulated robots: each segment takes the sum of its calls' times, after the robot's
    previous segment. Events go through `schedule(time, callback)` of the simulation loop."""

    def __init__(self, schedule: Schedule, now: Callable[[], float], times: CallTimeSource,
                 robot_models: Callable[[str], tuple[SkillSet, ExecModel]]) -> None:
        self._schedule = schedule
        self._now = now
        self._times = times
        self._robot_models = robot_models  # task_id -> (skill set, exec model)
        self._free_at: dict[str, float] = {}
        self._canceled: set[str] = set()
        self.planner = None  # set by attach()

    def attach(self, planner) -> None:
        self.planner = planner

    def dispatch(self, robot_id: str, task_id: str, segment: DispatchedSegment) -> None:
        _, model = self._robot_models(task_id)
        durations = self._times.times(task_id, segment, model)
        start = max(self._now(), self._free_at.get(robot_id, 0.0))
        end = start + sum(durations)
        self._free_at[robot_id] = end
        index = segment.index

        def started() -> None:
            if task_id not in self._canceled:
                self.planner.segment_started(task_id, index, start)

        def finished() -> None:
            if task_id not in self._canceled:
                self.planner.segment_finished(task_id, index, True, durations, "", end)

        self._schedule(start, started)
        self._schedule(end, finished)

    def cancel(self, robot_id: str, task_id: str) -> None:
        self._canceled.add(task_id)
