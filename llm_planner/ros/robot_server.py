"""Robot action server: serves /<id>/execute_segment (ExecuteSegment) with a skill backend.

A robot executes one segment at a time, in the order of `RobotQueue` (dispatch/robot_queue.py,
the rule the simulated robots follow too): one task's segments in index order, its plan to the
last segment before the next task's, moving on when the task sends nothing for `task_hold_s`
while another waits. A segment that arrives while the robot is busy waits (the planner sends
segment k+1 while k executes). Feedback reports each call as it starts; a canceled goal stops
the running call and ends CANCELED.

The robot's own thread runs the segments, not the executor: it picks the next accepted
goal, runs its calls (publishing each call's feedback as it starts) and goes straight on to
the next segment of the plan. The goal's reports (executing, and at its end the result) go
through a reporter thread in order, so the robot does not stand still between two segments
while they are published. The goal's execute callback only awaits that end and gives the goal
its final state, so a moving robot holds no executor thread and the node's executor stays
free for goal, cancel and result requests.

A call's time runs from its start to the next call's start, across segments too: when the
plan's next segment is already waiting as one ends, the robot goes on to it and the end of the
first is reported as the next one's first call starts, its last call running until then. So a
plan sent as one goal and a plan sent as several count the robot's own time between two calls
the same way (as call time, not as waiting for the planner)."""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from action_msgs.msg import GoalStatus
from rclpy.action import CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.node import Node
from rclpy.task import Future

from llm_planner.catalog.skills import SkillSet
from llm_planner.dispatch.robot_queue import TASK_HOLD_S, RobotQueue
from llm_planner.domain.calls import SkillCall
from llm_planner.domain.names import execute_segment_action, robot_server_node
from llm_planner.robots.backends import SkillBackend
from llm_planner.ros.hops import HopLog
from llm_planner.ros.qos import ACTION_SERVER
from llm_planner.ros.rclpy_compat import KeptResultsActionServer
from llm_planner.settings.fleet import RESULT_KEPT_S, RobotConfig
from llm_planner_interfaces.action import ExecuteSegment

GOAL_LISTED_S = 0.1  # how long an ended goal stays in the action server's goal list (KeptResultsActionServer)


@dataclass
class _Job:
    goal_handle: ServerGoalHandle[Any, Any, Any]
    cancel: threading.Event = field(default_factory=threading.Event)
    # (final status, result), once the robot is done
    done: Future[tuple[int, ExecuteSegment.Result]] = field(default_factory=Future)

    @property
    def task_id(self) -> str:
        return self.goal_handle.request.task_id

    @property
    def index(self) -> int:
        return self.goal_handle.request.segment_index


@dataclass
class _Ran:
    """A segment the robot has run: its result and when each call started and the last ended."""

    job: _Job
    result: ExecuteSegment.Result
    starts: list[float]
    end_s: float


class RobotServer(Node):
    def __init__(
        self,
        robot: RobotConfig,
        skill_set: SkillSet,
        backend: SkillBackend,
        task_hold_s: float = TASK_HOLD_S,
        result_kept_s: float = RESULT_KEPT_S,
    ) -> None:
        # No parameter services (it has no parameters): with fifty robot processes their
        # endpoints would multiply the work of DDS discovery.
        super().__init__(robot_server_node(robot.id), start_parameter_services=False)
        self.robot = robot
        self.skill_set = skill_set
        self.backend = backend
        self.result_kept_s = result_kept_s
        self.executed: deque[tuple[str, int]] = deque(maxlen=10_000)  # the latest (task, segment), in order
        self.handovers = 0  # segments that were waiting when the previous one of their plan ended
        self.hops = HopLog.from_env(self.get_name())
        self._cond = threading.Condition()
        self._queue: RobotQueue[_Job] = RobotQueue(task_hold_s, idle_since=time.monotonic())
        self._by_goal: dict[bytes, _Job] = {}
        self._closing = False
        self._running: _Job | None = None
        self._held: _Ran | None = None  # robot thread: ended, reported when the plan's next segment starts
        self._server = KeptResultsActionServer(
            self,
            ExecuteSegment,
            execute_segment_action(robot.id),
            execute_callback=self._until_done,
            goal_callback=self._on_goal,
            cancel_callback=self._on_cancel,
            handle_accepted_callback=self._on_accepted,
            result_kept_s=result_kept_s,
            goal_listed_s=GOAL_LISTED_S,
            on_goal_taken=self._taken if self.hops.enabled else None,
            **ACTION_SERVER,
        )
        self._reports: queue.SimpleQueue = queue.SimpleQueue()
        self._reporter = threading.Thread(target=self._report_loop, name=f"{robot.id}-reports", daemon=True)
        self._reporter.start()
        self._worker = threading.Thread(target=self._work, name=f"{robot.id}-robot", daemon=True)
        self._worker.start()

    @property
    def running(self) -> tuple[str, int] | None:
        """(task, segment) of the goal the robot is executing now, if any."""
        job = self._running
        return None if job is None else (job.task_id, job.index)

    # ------------------------------------------------------------------ executor callbacks
    def _taken(self, goal: ExecuteSegment.Goal) -> None:
        self.hops.mark(goal.task_id, goal.segment_index, "taken")

    def _on_goal(self, goal: ExecuteSegment.Goal) -> GoalResponse:
        # A plan's last segment may hold nothing: it tells the robot that the plan has ended.
        return GoalResponse.ACCEPT if goal.task_id and (goal.text or goal.last) else GoalResponse.REJECT

    def _on_cancel(self, goal_handle) -> CancelResponse:
        with self._cond:
            job = self._by_goal.get(bytes(goal_handle.goal_id.uuid))
            if job is not None:
                job.cancel.set()
                self._cond.notify_all()
        return CancelResponse.ACCEPT

    def _on_accepted(self, goal_handle) -> None:
        job = _Job(goal_handle)
        self.hops.mark(job.task_id, job.index, "accepted")
        with self._cond:
            self._by_goal[bytes(goal_handle.goal_id.uuid)] = job
            self._queue.add(job.task_id, job.index, job)
            self._cond.notify_all()

    async def _until_done(self, goal_handle) -> ExecuteSegment.Result:
        key = bytes(goal_handle.goal_id.uuid)
        outcome = await self._by_goal[key].done
        assert outcome is not None  # set by _end; the future is never canceled
        status, result = outcome
        with self._cond:
            self._by_goal.pop(key, None)
        # The final state is given here, as the callback returns: a goal expires GOAL_LISTED_S
        # after that state, and rclpy must be done with the goal by then. Set from the reporter
        # thread, the goal could expire before this executor got back to it, and rclpy's end
        # of an expired goal raises here.
        if status == GoalStatus.STATUS_CANCELED:
            goal_handle.canceled()  # only legal after a client's cancel request
        elif status == GoalStatus.STATUS_SUCCEEDED:
            goal_handle.succeed()
        else:
            goal_handle.abort()  # failed, or stopped by the robot itself (shutting down)
        return result

    # ------------------------------------------------------------------ the robot's thread
    def _hold_left(self) -> float | None:
        """How long the robot may still keep waiting for its current task while another task's
        goal waits (None: nothing to time, sleep until notified)."""
        if self._queue.current is None or not self._queue:
            return None
        return max(0.0, self._queue.hold_ends_s() - time.monotonic()) + 0.001

    def _work(self) -> None:
        ready_next: _Job | None = None  # the plan's next segment, already waiting when the last one ended
        while True:
            with self._cond:
                while True:
                    flush = self._queue.remove_if(lambda j: j.cancel.is_set() or self._closing)
                    for j in flush:  # between two segments: a canceled plan no longer holds the robot
                        self._queue.drop_current(j.task_id)
                    job = None if flush or self._closing else self._queue.pick(time.monotonic())
                    if flush or job is not None or self._closing:
                        break
                    self._cond.wait(self._hold_left())
                if job is not None:
                    self._running = job
                    self.handovers += job is ready_next
            if self._held is not None and (job is None or job is not ready_next):
                self._close(self._held, self._held.end_s)  # the robot does not go on with that plan now
                self._held = None
            for j in flush:  # canceled (or, at shutdown, all) waiting goals end without running
                reason = "robot shutting down" if self._closing else "canceled before it started"
                self._report(j.goal_handle.execute)
                self._report(self._end, j, ExecuteSegment.Result(success=False, message=reason))
            if job is None:
                if self._closing:
                    return
                continue
            ran = self._run_calls(job)
            with self._cond:
                self._running = None
                plan_ended = job.goal_handle.request.last or not ran.result.success
                # a call that ran and failed (not a cancel): the planner's follow-up comes next
                call_failed = not ran.result.success and not job.cancel.is_set() and bool(ran.result.call_times_s)
                self._queue.finished(time.monotonic(), plan_ended, call_failed)
                ready_next = next(
                    (j for j in self._queue.items() if (j.task_id, j.index) == (job.task_id, job.index + 1)), None
                )
            if ready_next is not None and ran.result.success and ran.starts:
                self._held = ran  # its last call runs until the next segment's first call starts
            else:
                self._close(ran, ran.end_s)

    def _begin(self, job: _Job, first_call_s: float | None) -> None:
        """The robot starts `job` (at its first call's start, if it has one): the segment held
        back for it ends there, then the goal is executing."""
        held, self._held = self._held, None
        if held is not None:
            self._close(held, held.end_s if first_call_s is None else first_call_s)
        self._report(job.goal_handle.execute)

    def _close(self, ran: _Ran, end_s: float) -> None:
        """Report a segment's end, a successful one's last call running until `end_s`."""
        if ran.result.success and ran.starts:
            ran.result.call_times_s = [end - start for start, end in zip(ran.starts, ran.starts[1:] + [end_s])]
        self.hops.mark(ran.job.task_id, ran.job.index, "ended")
        self._report(self._end, ran.job, ran.result)

    def _end(self, job: _Job, result: ExecuteSegment.Result) -> None:
        """The robot is done with the goal: its result goes out now, and its execute callback
        ends it with the final state."""
        goal_handle = job.goal_handle
        if goal_handle.is_cancel_requested:
            status = GoalStatus.STATUS_CANCELED
        else:
            status = GoalStatus.STATUS_SUCCEEDED if result.success else GoalStatus.STATUS_ABORTED
        self._server.send_result(goal_handle, status, result)
        job.done.set_result((status, result))
        if self.executor is not None:
            self.executor.wake()  # rclpy resumes an awaiting callback only when its executor wakes

    def _run_calls(self, job: _Job) -> _Ran:
        goal = job.goal_handle.request
        self.executed.append((goal.task_id, goal.segment_index))
        times: list[float] = []
        starts: list[float] = []

        def failed(message: str) -> _Ran:
            return _Ran(
                job, ExecuteSegment.Result(success=False, message=message, call_times_s=times), starts, time.monotonic()
            )

        try:
            calls = self._calls(goal)
        except ValueError as exc:
            self._begin(job, None)
            return failed(str(exc))
        self.hops.mark(goal.task_id, goal.segment_index, "started")
        if not calls:
            self._begin(job, None)
        for i, call in enumerate(calls):
            starts.append(time.monotonic())
            if i == 0:
                self._begin(job, starts[0])
            # Feedback straight from here (cheap, and the start report the planner waits for);
            # the goal's state changes go through the reporter.
            job.goal_handle.publish_feedback(
                ExecuteSegment.Feedback(call_index=i, call=call.text, stamp=self.get_clock().now().to_msg())
            )
            outcome = self.backend.execute(call, job.cancel, goal.task_id)
            times.append(outcome.seconds)
            if job.cancel.is_set():
                return failed(f"canceled during {call.text}")
            if not outcome.success:
                return failed(outcome.message)
        # The robot's time on each call runs from its start to the next call's start (the last:
        # to the segment's end, or to the plan's next segment's first call, see _work), its own
        # bookkeeping between calls included: the planner chains a segment's units from its first
        # call's start, so the segment ends when the robot is done with it.
        return _Ran(job, ExecuteSegment.Result(success=True, message=""), starts, time.monotonic())

    def _report(self, fn, *args) -> None:
        self._reports.put((fn, args))

    def _report_loop(self) -> None:
        while True:
            item = self._reports.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 -- one failed report must not silence the robot's later ones
                self.get_logger().error(f"reporting to ROS failed: {traceback.format_exc()}")

    def _calls(self, goal) -> list[SkillCall]:
        """The calls the planner parsed and sent, in order; a client that sends only the
        segment's text gets it parsed here."""
        if not goal.calls:
            return self.skill_set.find_calls(goal.text)
        return [self.skill_set.parse_call(text) for text in goal.calls]

    def stop(self, timeout_s: float = 5.0) -> None:
        """Cancel what is waiting or running, end those goals and stop the robot's thread."""
        with self._cond:
            self._closing = True
            for job in self._queue.items() + ([self._running] if self._running else []):
                job.cancel.set()
            self._cond.notify_all()
        self._worker.join(timeout_s)
        self._reports.put(None)  # after the robot's last reports
        self._reporter.join(timeout_s)

    def destroy_node(self) -> None:
        self.stop()
        self._server.destroy()
        self.backend.close()
        self.hops.write()
        super().destroy_node()
