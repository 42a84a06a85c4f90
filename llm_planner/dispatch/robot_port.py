"""The planner's view of robots, and simulated robots for the discrete-event simulation.

A port is built for its planner (`Planner(..., robots=factory)` calls `factory(listener)`),
so robots report back through the listener from the start: `segment_started` /
`segment_finished`. The order a robot runs its segments in is `RobotQueue`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from llm_planner.catalog.exec_model import ExecModel, TaskGenerators
from llm_planner.catalog.faults import CallFaults, failure_message
from llm_planner.catalog.skills import SkillSet
from llm_planner.dispatch.robot_queue import RobotQueue
from llm_planner.domain.tasks import DispatchedSegment


class RobotPort(Protocol):
    def dispatch(self, robot_id: str, task_id: str, segment: DispatchedSegment) -> None: ...

    def cancel(self, robot_id: str, task_id: str) -> None: ...


class RobotListener(Protocol):
    """What a port reports to (the planner), and asks of it."""

    def segment_started(self, task_id: str, index: int, t: float) -> None: ...

    def segment_finished(
        self, task_id: str, index: int, success: bool, call_times_s: list[float], message: str, t: float
    ) -> None: ...

    def robot_models(self, task_id: str) -> tuple[SkillSet, ExecModel]: ...


class CallTimeSource:
    """Execution time of each call of a task, in plan order: the recorded times where the job
    has them, otherwise drawn from the exec model with a generator seeded by (seed, task), so
    every policy simulated with the same seed sees the same robot; and which calls fail, with
    `fail_rates` (catalog/faults.py)."""

    def __init__(self, seed: int, fail_rates: dict[str, float] | None = None) -> None:
        self.seed = seed
        self.faults = CallFaults(fail_rates or {}, seed)
        self._recorded: dict[str, list[float]] = {}
        self._consumed: dict[str, int] = {}
        self._rngs = TaskGenerators(seed)

    def set_recorded(self, task_id: str, seconds: list[float]) -> None:
        self._recorded[task_id] = list(seconds)

    def times(self, task_id: str, segment: DispatchedSegment, model: ExecModel) -> list[float]:
        recorded = self._recorded.get(task_id, [])
        out = []
        for call in segment.calls:
            i = self._consumed.get(task_id, 0)
            self._consumed[task_id] = i + 1
            out.append(recorded[i] if i < len(recorded) else model.sample(call, self._rngs(task_id)))
        return out

    def failed_call(self, task_id: str, segment: DispatchedSegment) -> int | None:
        """The index of the segment's first call that fails, if one does."""
        return next((i for i, call in enumerate(segment.calls) if self.faults.fails(task_id, call)), None)


Schedule = Callable[[float, Callable[[], None]], None]


@dataclass
class _SimRobot:
    queue: RobotQueue[DispatchedSegment] = field(default_factory=RobotQueue)
    busy: bool = False


class SimRobots:
    """Simulated robots: segments run in the order of `RobotQueue`, the rule the ROS robot
    server follows too. A segment takes the sum of its calls' times. Events go through
    `schedule(time, callback)` of the simulation loop; starts and ends go to `planner`."""

    def __init__(
        self, schedule: Schedule, now: Callable[[], float], times: CallTimeSource, planner: RobotListener
    ) -> None:
        self._schedule = schedule
        self._now = now
        self._times = times
        self._robots: dict[str, _SimRobot] = {}
        self._canceled: set[str] = set()
        self._planner = planner

    def dispatch(self, robot_id: str, task_id: str, segment: DispatchedSegment) -> None:
        robot = self._robots.setdefault(robot_id, _SimRobot())
        robot.queue.add(task_id, segment.index, segment)
        self._next(robot_id, self._now())

    def cancel(self, robot_id: str, task_id: str) -> None:
        self._canceled.add(task_id)
        robot = self._robots.get(robot_id)
        if robot is not None:
            robot.queue.remove_task(task_id)
            if not robot.busy:
                robot.queue.drop_current(task_id)
                self._next(robot_id, self._now())

    def _next(self, robot_id: str, now: float) -> None:
        """Start the next segment at `now` if one may run (the simulation loop runs events
        only between engine steps, so `now` is when the robot really became free)."""
        robot = self._robots[robot_id]
        if robot.busy:
            return
        segment = robot.queue.pick(now)
        if segment is None:
            if robot.queue:  # the current task may still send more: look again when the hold ends
                at = robot.queue.hold_ends_s()
                self._schedule(at, lambda: self._next(robot_id, at))
            return
        task_id = robot.queue.current
        assert task_id is not None  # pick made the segment's task the current one
        _, model = self._planner.robot_models(task_id)
        durations = self._times.times(task_id, segment, model)
        failed = self._times.failed_call(task_id, segment)
        if failed is not None:  # as a robot reports a failure: the times of the calls run, the failed one last
            durations = durations[: failed + 1]
        message = "" if failed is None else failure_message(segment.calls[failed])
        end = now + sum(durations)
        robot.busy = True
        index = segment.index

        def started() -> None:
            if task_id not in self._canceled:
                self._planner.segment_started(task_id, index, now)

        def finished() -> None:
            robot.busy = False
            robot.queue.finished(
                end,
                plan_ended=segment.last or failed is not None or task_id in self._canceled,
                call_failed=failed is not None,
            )
            if task_id not in self._canceled:
                self._planner.segment_finished(task_id, index, failed is None, durations, message, end)
            self._next(robot_id, end)

        self._schedule(now, started)
        self._schedule(end, finished)
