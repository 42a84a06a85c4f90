"""Robot action server: serves /<id>/execute_segment (ExecuteSegment) with a skill backend.

A robot executes one segment at a time: segments of one task strictly in index order, and
one task's plan to its last segment before the next task's (tasks in the order their goals
arrived). A segment that arrives while the robot is busy waits (the planner sends segment
k+1 while k executes). If the current task sends nothing more for `task_hold_s` while
another task waits, the robot moves on (its planner may have given up on it). Feedback
reports each call as it starts; a canceled goal stops the running call and ends CANCELED.

Accepted goals wait in the robot's own queue, not in the executor: a scheduler thread picks
the next one and only then starts its execution (`goal_handle.execute()`), so a waiting
segment holds no executor thread; an executing one holds one while the robot moves. The one
exception makes a plan's segments follow each other without a gap: while a segment runs, the
task's next one, once it arrives, is started early and waits (holding a thread) for the
running one to hand the robot over the moment its calls end."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from llm_planner_interfaces.action import ExecuteSegment
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from llm_planner.catalog.skills import SkillSet
from llm_planner.dispatch.robot_port import TASK_HOLD_S
from llm_planner.domain.calls import SkillCall
from llm_planner.robots.backends import SkillBackend
from llm_planner.ros.qos import ACTION_SERVER
from llm_planner.settings.fleet import RobotConfig


@dataclass
class _Job:
    ticket: int
    goal_handle: object
    cancel: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    turn: threading.Event = field(default_factory=threading.Event)  # the robot is free for it: run
    prestarted: bool = False  # executing (holding an executor thread), waiting for its turn
    result: object = None

    @property
    def task_id(self) -> str:
        return self.goal_handle.request.task_id

    @property
    def index(self) -> int:
        return self.goal_handle.request.segment_index


class RobotServer(Node):
    def __init__(self, robot: RobotConfig, skill_set: SkillSet, backend: SkillBackend,
                 task_hold_s: float = TASK_HOLD_S) -> None:
        super().__init__(f"{robot.id}_server")
        self.robot = robot
        self.skill_set = skill_set
        self.backend = backend
        self.task_hold_s = task_hold_s
        self.executed: list[tuple[str, int]] = []  # (task, segment) in execution order
        self.handovers = 0  # segments started straight from the previous one of their task
        self.received: dict[tuple[str, int], float] = {}  # (task, segment) -> monotonic time accepted
        self._cond = threading.Condition()
        self._waiting: list[_Job] = []
        self._by_goal: dict[bytes, _Job] = {}
        self._current: str | None = None  # task whose plan the robot is in the middle of
        self._idle_since = time.monotonic()
        self._tickets = itertools.count()
        self._closing = False
        self._running: _Job | None = None
        self._scheduler = threading.Thread(target=self._schedule, name=f"{robot.id}-scheduler", daemon=True)
        self._scheduler.start()
        self._server = ActionServer(
            self, ExecuteSegment, f"/{robot.id}/execute_segment",
            execute_callback=self._execute, goal_callback=self._on_goal, cancel_callback=self._on_cancel,
            handle_accepted_callback=self._on_accepted, callback_group=ReentrantCallbackGroup(),
            # Ended goals stay in every status message until they expire; keep that list short.
            result_timeout=15, **ACTION_SERVER)

    def _on_goal(self, goal: ExecuteSegment.Goal) -> GoalResponse:
        return GoalResponse.ACCEPT if goal.task_id and goal.text else GoalResponse.REJECT

    def _on_cancel(self, goal_handle) -> CancelResponse:
        job = self._by_goal.get(bytes(goal_handle.goal_id.uuid))
        if job is not None:
            job.cancel.set()
            with self._cond:
                self._cond.notify_all()
        return CancelResponse.ACCEPT

    def _on_accepted(self, goal_handle) -> None:
        job = _Job(next(self._tickets), goal_handle)
        self.received[(job.task_id, job.index)] = time.monotonic()
        with self._cond:
            self._by_goal[bytes(goal_handle.goal_id.uuid)] = job
            self._waiting.append(job)
            self._cond.notify_all()

    def _execute(self, goal_handle) -> ExecuteSegment.Result:
        """Runs in an executor thread once the scheduler has started this goal (a prestarted
        one first waits here for its turn)."""
        key = bytes(goal_handle.goal_id.uuid)
        job = self._by_goal[key]
        try:
            while not job.turn.wait(0.2):
                if self._closing or job.cancel.is_set():
                    break
            if self._closing:
                result = ExecuteSegment.Result(success=False, message="robot shutting down")
            elif job.cancel.is_set():
                result = ExecuteSegment.Result(success=False, message="canceled before it started")
            else:
                result = self._run_calls(job)
                if result.success and not job.cancel.is_set():
                    self._hand_over(job)
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()  # only legal after a client's cancel request
            elif job.cancel.is_set():
                goal_handle.abort()  # stopped by the robot itself (shutting down)
            elif result.success:
                goal_handle.succeed()
            else:
                goal_handle.abort()
            job.result = result
            return result
        finally:
            self._by_goal.pop(key, None)
            job.finished.set()

    # ------------------------------------------------------------------ scheduler thread
    def _next_job(self) -> _Job | None:
        heads: dict[str, _Job] = {}
        for job in self._waiting:  # per task, the lowest index first
            if job.task_id not in heads or job.index < heads[job.task_id].index:
                heads[job.task_id] = job
        if not heads:
            return None
        if self._current in heads:
            return heads[self._current]
        if self._current is not None and time.monotonic() - self._idle_since < self.task_hold_s:
            return None
        return min(heads.values(), key=lambda j: j.ticket)

    def _schedule(self) -> None:
        while True:
            with self._cond:
                while True:
                    flush = [j for j in self._waiting if j.cancel.is_set() or self._closing]
                    if flush:
                        break
                    if self._closing:
                        return
                    job = self._next_job()
                    if job is not None:
                        self._waiting.remove(job)
                        self._current = job.task_id
                        break
                    self._cond.wait(0.2)
            if flush:  # end canceled (or, at shutdown, all) waiting goals without running them
                for j in flush:
                    with self._cond:
                        self._waiting.remove(j)
                    j.turn.set()
                    if not j.prestarted:
                        j.goal_handle.execute()
                continue
            if not self._run(job):
                return

    def _run(self, job: _Job) -> bool:
        """Start `job` and follow the robot until it is idle again: meanwhile the task's next
        segment, once it waits, is prestarted, and the running job hands the robot straight
        to it when its calls end (no trip through the executor between two segments of a
        plan). False when the robot is shutting down."""
        self._running = job
        job.turn.set()
        if not job.prestarted:
            job.goal_handle.execute()
        while True:
            while not job.finished.wait(0.05):
                if self._closing:
                    return False
                self._prestart_next(job)
            with self._cond:
                if self._running is not job:  # handed over to the task's next segment
                    job = self._running
                    continue
                self._running = None
                self._idle_since = time.monotonic()
                if job.goal_handle.request.last or not job.result.success:
                    self._current = None
                return True

    def _next_of(self, job: _Job) -> _Job | None:
        return next((j for j in self._waiting if j.task_id == job.task_id and j.index == job.index + 1
                     and not j.cancel.is_set()), None)

    def _prestart_next(self, job: _Job) -> None:
        with self._cond:
            nxt = self._next_of(job)
            if nxt is None or nxt.prestarted or job.goal_handle.request.last:
                return
            nxt.prestarted = True
        nxt.goal_handle.execute()  # its callback waits for its turn

    def _hand_over(self, job: _Job) -> None:
        """Called by a job whose calls ended: the robot goes on with the task's next segment
        at once if it is prestarted."""
        with self._cond:
            nxt = self._next_of(job)
            if nxt is None or not nxt.prestarted or self._closing:
                return
            self._waiting.remove(nxt)
            self._running = nxt
            self.handovers += 1
        nxt.turn.set()

    def _run_calls(self, job: _Job) -> ExecuteSegment.Result:
        goal = job.goal_handle.request
        self.executed.append((goal.task_id, goal.segment_index))
        try:
            calls = self._calls(goal)
        except ValueError as exc:
            return ExecuteSegment.Result(success=False, message=str(exc), call_times_s=[])
        times: list[float] = []
        for i, call in enumerate(calls):
            job.goal_handle.publish_feedback(ExecuteSegment.Feedback(call_index=i, call=call.text,
                                                                     stamp=self.get_clock().now().to_msg()))
            outcome = self.backend.execute(call, job.cancel)
            times.append(outcome.seconds)
            if job.cancel.is_set():
                return ExecuteSegment.Result(success=False, message=f"canceled during {call.text}", call_times_s=times)
            if not outcome.success:
                return ExecuteSegment.Result(success=False, message=outcome.message, call_times_s=times)
        return ExecuteSegment.Result(success=True, message="", call_times_s=times)

    def _calls(self, goal) -> list[SkillCall]:
        """The calls the planner parsed and sent, in order; a client that sends only the
        segment's text gets it parsed here."""
        if not goal.calls:
            return self.skill_set.find_calls(goal.text)
        return [self.skill_set.parse_call(text) for text in goal.calls]

    def stop(self) -> None:
        """Cancel what is waiting or running (so no executor thread stays busy) and stop."""
        with self._cond:
            self._closing = True
            for job in self._waiting + ([self._running] if self._running else []):
                job.cancel.set()
            self._cond.notify_all()

    def destroy_node(self) -> None:
        self.stop()
        self._scheduler.join(timeout=5)
        self._server.destroy()
        self.backend.close()
        super().destroy_node()
