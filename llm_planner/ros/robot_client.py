"""The planner's side of the ExecuteSegment action: one action client per robot, goals sent
in order, results and failures (robot timeout, vanished server) posted back to the planner
thread. Implements the core's RobotPort protocol over ROS 2."""

from __future__ import annotations

import math
import queue
import threading
import time
from dataclasses import dataclass

from action_msgs.msg import GoalStatus
from llm_planner_interfaces.action import ExecuteSegment
from rclpy.action import ActionClient
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.time import Time

from llm_planner.domain.clock import WallClock
from llm_planner.domain.tasks import DispatchedSegment
from llm_planner.planning.planner import Planner
from llm_planner.ros.qos import ACTION_CLIENT
from llm_planner.settings.fleet import FleetConfig

_ENDED = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED)


@dataclass
class _Pending:
    robot_id: str
    task_id: str
    index: int
    worst_s: float  # worst-case execution estimate of the segment
    sent_s: float
    handle: object = None
    started_s: float = math.nan
    canceled: bool = False
    asked_again_s: float = math.nan  # when the result was last asked for again


class RosRobotPort:
    """Planner → robots over ExecuteSegment. Results come back into the planner thread via
    the driver. A segment fails its task when the robot does not accept it within the robot
    timeout, does not finish it within its worst-case execution time plus the timeout once
    started, or when the robot's action server disappears for longer than the timeout (a
    segment may wait any time behind other work on a robot that is alive).

    rclpy action clients are not safe to call from a foreign thread while the executor
    handles their responses, so the planner thread only queues goal sends and cancels; a
    guard condition runs them in the executor, in one mutually exclusive callback group
    with all action-client callbacks."""

    def __init__(self, node: Node, fleet: FleetConfig, driver_post, clock: WallClock, timeout_s: float) -> None:
        self.node = node
        self.post = driver_post
        self.clock = clock
        self.timeout_s = timeout_s
        self.planner: Planner | None = None
        group = MutuallyExclusiveCallbackGroup()
        self.clients = {r.id: ActionClient(node, ExecuteSegment, f"/{r.id}/execute_segment", callback_group=group,
                                     **ACTION_CLIENT)
                        for r in fleet.robots}
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._lock = threading.Lock()
        self._gone_since: dict[str, float] = {}
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._wake = node.create_guard_condition(self._drain_outbox, callback_group=group)
        self._timer = node.create_timer(0.2, self._check_timeouts, callback_group=group)

    def _in_executor(self, fn) -> None:
        self._outbox.put(fn)
        self._wake.trigger()

    def _drain_outbox(self) -> None:
        while True:
            try:
                fn = self._outbox.get_nowait()
            except queue.Empty:
                return
            fn()

    # called in the planner thread
    def dispatch(self, robot_id: str, task_id: str, segment: DispatchedSegment) -> None:
        client = self.clients.get(robot_id)
        if client is None or not client.server_is_ready():
            reason = "not in the fleet" if client is None else f"no action server /{robot_id}/execute_segment"
            t = self.clock.now()
            # posted, not called: the planner is in the middle of handling this task
            self.post(lambda: self.planner.segment_finished(task_id, segment.index, False, [],
                                                            f"robot {robot_id}: {reason}", t))
            return
        _, model = self.planner.robot_models(task_id)
        worst = model.estimate_calls(segment.calls, "max")
        entry = _Pending(robot_id, task_id, segment.index, worst, self.clock.now())
        with self._lock:
            self._pending[(task_id, segment.index)] = entry
        goal = ExecuteSegment.Goal(task_id=task_id, segment_index=segment.index, text=segment.text,
                                   calls=segment.call_texts, last=segment.last)

        def send() -> None:
            entry.sent_s = self.clock.now()
            future = client.send_goal_async(goal, feedback_callback=lambda fb: self._on_feedback(entry, fb))
            future.add_done_callback(lambda f: self._in_executor(lambda: self._on_goal_response(entry, f)))

        self._in_executor(send)

    def probe(self, robot_id: str, timeout_s: float) -> bool:
        """Round trip to a robot's action server: a goal with an empty task_id, which robots
        reject. A reply proves that both directions are matched, which `server_is_ready()`
        (this side's view of discovery) does not. Call from outside the executor."""
        client = self.clients[robot_id]
        replied = threading.Event()

        def send() -> None:
            if client.server_is_ready():
                future = client.send_goal_async(ExecuteSegment.Goal(task_id="", text=""))
                future.add_done_callback(lambda f: replied.set())

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._in_executor(send)
            if replied.wait(min(1.0, max(0.0, deadline - time.monotonic()))):
                return True
        return False

    def cancel(self, robot_id: str, task_id: str) -> None:
        with self._lock:
            entries = [p for p in self._pending.values() if p.task_id == task_id]
            for p in entries:
                del self._pending[(p.task_id, p.index)]
                p.canceled = True

        def cancel_goals() -> None:
            for p in entries:
                if p.handle is not None:
                    p.handle.cancel_goal_async()

        self._in_executor(cancel_goals)

    # executor threads
    def _on_goal_response(self, entry: _Pending, future) -> None:
        handle = future.result()
        if not handle.accepted:
            self._finish(entry, False, [], f"robot {entry.robot_id} rejected segment {entry.index}")
            return
        entry.handle = handle
        if entry.canceled:  # the task ended while the goal was on its way
            handle.cancel_goal_async()
            return
        self._request_result(entry)

    def _request_result(self, entry: _Pending) -> None:
        # Done callbacks of this future run outside the callback group: hop back into it.
        entry.handle.get_result_async().add_done_callback(
            lambda f: self._in_executor(lambda: self._on_result(entry, f)))

    def _on_feedback(self, entry: _Pending, feedback_msg) -> None:
        if feedback_msg.feedback.call_index == 0 and math.isnan(entry.started_s):
            t = entry.started_s = self._when(feedback_msg.feedback.stamp)
            self.post(lambda: self.planner.segment_started(entry.task_id, entry.index, t))

    def _when(self, stamp) -> float:
        """The planner clock's time of a robot's stamp (ROS time), so that a report's delivery
        delay does not count as the robot waiting; the time of receipt if it has no stamp."""
        now = self.clock.now()
        if not (stamp.sec or stamp.nanosec):
            return now
        age = (self.node.get_clock().now() - Time.from_msg(stamp)).nanoseconds / 1e9
        return now - min(max(age, 0.0), now)

    def _on_result(self, entry: _Pending, future) -> None:
        response = future.result()
        result = response.result
        ok = result.success and response.status == GoalStatus.STATUS_SUCCEEDED
        message = result.message or ("" if ok else f"goal ended with status {response.status}")
        self._finish(entry, ok, list(result.call_times_s), message)

    def _finish(self, entry: _Pending, ok: bool, times: list[float], message: str) -> None:
        t = self.clock.now()
        with self._lock:
            if self._pending.pop((entry.task_id, entry.index), None) is None:
                return  # already timed out or canceled
        self.post(lambda: self.planner.segment_finished(entry.task_id, entry.index, ok, times, message, t))

    def _check_timeouts(self) -> None:
        now = self.clock.now()
        for robot_id, client in self.clients.items():
            if client.server_is_ready():
                self._gone_since.pop(robot_id, None)
            else:
                self._gone_since.setdefault(robot_id, now)
        with self._lock:
            pending = list(self._pending.values())
        for p in pending:
            overdue = not math.isnan(p.started_s) and now - p.started_s > p.worst_s + 1.0
            if p.handle is not None and (p.handle.status in _ENDED or overdue):
                # The goal ended (or should have) but its result has not arrived: a service
                # response or a goal status message can be lost under load or while DDS
                # discovery is still matching endpoints; ask again, once a second (a result
                # asked for twice is taken once).
                if math.isnan(p.asked_again_s):
                    p.asked_again_s = now
                elif now - p.asked_again_s > 1.0:
                    p.asked_again_s = now
                    self._request_result(p)
            reason = None
            if p.handle is None and now - p.sent_s > self.timeout_s:
                reason = f"robot {p.robot_id} did not accept segment {p.index} within {self.timeout_s:.1f} s"
            elif not math.isnan(p.started_s) and now - p.started_s > p.worst_s + self.timeout_s:
                status = p.handle.status if p.handle is not None else "not accepted yet"
                reason = (f"robot {p.robot_id} gave no result for segment {p.index} within "
                          f"{p.worst_s + self.timeout_s:.1f} s of starting it (goal status {status})")
            elif now - self._gone_since.get(p.robot_id, now) > self.timeout_s:
                reason = f"robot {p.robot_id}'s action server disappeared"
            if reason:
                if p.handle is not None:
                    p.handle.cancel_goal_async()
                self._finish(p, False, [], reason)
