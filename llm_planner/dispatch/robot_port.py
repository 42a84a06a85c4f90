"""The planner's view of robots, and simulated robots for the discrete-event simulation.

A robot executes one task's segments strictly in the order they are dispatched, and one
task's plan to its end before the next task's; a segment that arrives while the robot is busy
waits in its queue. Robots report back through the planner's `segment_started` /
`segment_finished`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from llm_planner.catalog.exec_model import ExecModel, task_rng
from llm_planner.catalog.skills import SkillSet
from llm_planner.domain.tasks import DispatchedSegment

# A robot in the middle of a task's plan waits this long for the task's next segment before it
# moves on to another task that waits (its planner may have given up on the first).
TASK_HOLD_S = 5.0


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
            rng = self._rngs[task_id] = task_rng(self.seed, task_id)
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


@dataclass
class _SimRobot:
    waiting: list[tuple[str, DispatchedSegment]] = field(default_factory=list)  # in dispatch order
    busy: bool = False
    current: str | None = None  # the task whose plan the robot is in the middle of
    idle_since: float = 0.0


class SimRobots:
    """Simulated robots, by the rule the ROS robot server follows: one segment at a time, a
    task's plan to its last segment before the next task's (tasks in the order their first
    segment arrived), moving on if the current task sends nothing for TASK_HOLD_S while
    another waits. A segment takes the sum of its calls' times. Events go through
    `schedule(time, callback)` of the simulation loop."""

    def __init__(self, schedule: Schedule, now: Callable[[], float], times: CallTimeSource,
                 robot_models: Callable[[str], tuple[SkillSet, ExecModel]]) -> None:
        self._schedule = schedule
        self._now = now
        self._times = times
        self._robot_models = robot_models  # task_id -> (skill set, exec model)
        self._robots: dict[str, _SimRobot] = {}
        self._canceled: set[str] = set()
        self.planner = None  # set by attach()

    def attach(self, planner) -> None:
        self.planner = planner

    def dispatch(self, robot_id: str, task_id: str, segment: DispatchedSegment) -> None:
        robot = self._robots.setdefault(robot_id, _SimRobot())
        robot.waiting.append((task_id, segment))
        self._next(robot_id, self._now())

    def cancel(self, robot_id: str, task_id: str) -> None:
        self._canceled.add(task_id)
        robot = self._robots.get(robot_id)
        if robot is not None:
            robot.waiting = [(t, s) for t, s in robot.waiting if t != task_id]
            if robot.current == task_id and not robot.busy:
                robot.current = None
                self._next(robot_id, self._now())

    def _pick(self, robot: _SimRobot, now: float) -> int | None:
        """Index in `waiting` of the segment to run next, if any may run now."""
        if not robot.waiting:
            return None
        for i, (task_id, _) in enumerate(robot.waiting):
            if task_id == robot.current:
                return i
        if robot.current is not None and now < robot.idle_since + TASK_HOLD_S:
            return None
        return 0

    def _next(self, robot_id: str, now: float) -> None:
        """Start the next segment at `now` if one may run (the simulation loop runs events
        only between engine steps, so `now` is when the robot really became free)."""
        robot = self._robots[robot_id]
        if robot.busy:
            return
        i = self._pick(robot, now)
        if i is None:
            if robot.waiting:  # the current task may still send more: look again when the hold ends
                at = robot.idle_since + TASK_HOLD_S
                self._schedule(at, lambda: self._next(robot_id, at))
            return
        task_id, segment = robot.waiting.pop(i)
        _, model = self._robot_models(task_id)
        durations = self._times.times(task_id, segment, model)
        end = now + sum(durations)
        robot.busy, robot.current = True, task_id
        index = segment.index

        def started() -> None:
            if task_id not in self._canceled:
                self.planner.segment_started(task_id, index, now)

        def finished() -> None:
            robot.busy, robot.idle_since = False, end
            if segment.last or task_id in self._canceled:
                robot.current = None
            if task_id not in self._canceled:
                self.planner.segment_finished(task_id, index, True, durations, "", end)
            self._next(robot_id, end)

        self._schedule(now, started)
        self._schedule(end, finished)
