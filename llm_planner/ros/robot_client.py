"""The planner's side of the ExecuteSegment action: one link node (an action client) per
robot, goals sent in order, results and failures (robot timeout, vanished server) posted
back to the planner thread. Implements the core's RobotPort protocol over ROS 2."""

from __future__ import annotations

import math
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.node import Node
from rclpy.time import Time

from llm_planner.dispatch.robot_port import RobotListener
from llm_planner.domain.clock import WallClock
from llm_planner.domain.names import execute_segment_action
from llm_planner.domain.tasks import DispatchedSegment
from llm_planner.ros.hops import HopLog
from llm_planner.ros.qos import ACTION_CLIENT
from llm_planner.ros.rclpy_compat import send_goal
from llm_planner.settings.fleet import FleetConfig
from llm_planner_interfaces.action import ExecuteSegment

REASK_FIRST_S = 0.25  # after seeing a goal end without its result, before asking again
# A robot heard from this recently counts as present without asking discovery: the question
# (`server_is_ready()`) holds the GIL ~0.1 ms with fifty robots, and was asked for every goal
# and, for every busy link, five times a second.
PRESENT_S = 0.5
TIMEOUT_CHECK_S = 0.2  # how often the port checks its busy links for timeouts (check_timeouts)
_ENDED = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED)


@dataclass
class _Pending:
    task_id: str
    index: int
    worst_s: float  # worst-case execution estimate of the segment
    sent_s: float
    handle: ClientGoalHandle[Any, Any, Any] | None = None  # once the robot accepted the goal
    started_s: float = math.nan
    canceled: bool = False
    # Once it has ended (or should have) without a result: when this side first saw that or
    # last asked for the result again, and how often it has asked again.
    asked_again_s: float = math.nan
    asked_again: int = 0


class RobotLink(Node):
    """The planner's end of one robot's ExecuteSegment action, as a node of its own so that it
    spins in its own executor (ros/spin.py): its executor waits on this one action client
    only, and its callbacks run one at a time. A segment fails its task when the robot does
    not accept it within the robot timeout, does not finish it within its worst-case
    execution time plus the timeout once started, or when the robot's action server
    disappears for longer than the timeout (a segment may wait any time behind other work on
    a robot that is alive).

    Goals, cancels and result requests go out from this node's executor thread, where their
    responses arrive: the planner thread queues sends and cancels, and a guard condition runs
    them here. (In the links process goals go out from the thread that reads the planner's
    commands: `RosRobotPort.send_in_caller`.)"""

    def __init__(self, robot_id: str, port: RosRobotPort) -> None:
        # A helper of the planner node: no parameter services or rosout of its own (with fifty
        # robots those would add hundreds of endpoints for DDS discovery to match), and not
        # renamed by the command line's remaps, which are meant for the planner node.
        super().__init__(
            f"llm_planner_link_{robot_id}",
            start_parameter_services=False,
            enable_rosout=False,
            use_global_arguments=False,
        )
        self.robot_id = robot_id
        self.port = port
        self.client: ActionClient[Any, Any, Any] = ActionClient(
            self, ExecuteSegment, execute_segment_action(robot_id), **ACTION_CLIENT
        )
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._lock = threading.Lock()
        self._gone_since: float | None = None
        self._heard_s = -math.inf  # when this link last heard from the robot (its executor thread)
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._wake = self.create_guard_condition(self._drain_outbox)

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def in_executor(self, fn) -> None:
        """Run `fn` in this node's executor thread."""
        self._outbox.put(fn)
        self._wake.trigger()

    def _drain_outbox(self) -> None:
        while True:
            try:
                fn = self._outbox.get_nowait()
            except queue.Empty:
                return
            fn()

    def dispatch(self, task_id: str, segment: DispatchedSegment, worst_s: float) -> None:
        """The goal goes out from this node's executor thread, or from the calling thread if
        the port says so (the links process: nothing there holds the GIL for long). Sent
        straight from the planner thread, a goal left sooner but its response, feedback and
        result came back while the planner still held the GIL (docs/performance/ros-path.md, "Tried and dropped")."""
        entry = _Pending(task_id, segment.index, worst_s, self.port.clock.now())
        with self._lock:
            self._pending[(task_id, segment.index)] = entry
        goal = ExecuteSegment.Goal(
            task_id=task_id, segment_index=segment.index, text=segment.text, calls=segment.call_texts, last=segment.last
        )

        def send() -> None:
            if not self._server_present():
                self._finish(
                    entry, False, [], f"robot {self.robot_id}: no action server {execute_segment_action(self.robot_id)}"
                )
                return
            entry.sent_s = self.port.clock.now()
            self.port.hops.mark(task_id, segment.index, "sent")
            send_goal(
                self.client,
                goal,
                lambda f: self._on_goal_response(entry, f),
                feedback_callback=lambda fb: self._on_feedback(entry, fb),
            )

        if self.port.send_in_caller:
            send()
        else:
            self.in_executor(send)

    def cancel(self, task_id: str) -> None:
        with self._lock:
            entries = [p for p in self._pending.values() if p.task_id == task_id]
            for p in entries:
                del self._pending[(p.task_id, p.index)]
                p.canceled = True

        def cancel_goals() -> None:
            for p in entries:
                if p.handle is not None:
                    p.handle.cancel_goal_async()

        self.in_executor(cancel_goals)

    def probe(self, timeout_s: float) -> bool:
        """Round trip to the robot's action server: a goal with an empty task_id, which robots
        reject. A reply proves that both directions are matched, which `server_is_ready()`
        (this side's view of discovery) does not. Call from outside the executor."""
        replied = threading.Event()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.client.server_is_ready():
                send_goal(self.client, ExecuteSegment.Goal(task_id="", text=""), lambda f: replied.set())
            if replied.wait(min(1.0, max(0.0, deadline - time.monotonic()))):
                return True
        return False

    # this node's executor
    def _server_present(self) -> bool:
        """Whether the robot's action server is there: heard from within PRESENT_S, or else
        seen by discovery."""
        if time.monotonic() - self._heard_s < PRESENT_S:
            return True
        if self.client.server_is_ready():
            self._heard_s = time.monotonic()
            return True
        return False

    def _on_goal_response(self, entry: _Pending, future) -> None:
        self.port.hops.mark(entry.task_id, entry.index, "acknowledged")
        self._heard_s = time.monotonic()
        handle = future.result()
        if not handle.accepted:
            self._finish(entry, False, [], f"robot {self.robot_id} rejected segment {entry.index}")
            return
        entry.handle = handle
        if entry.canceled:  # the task ended while the goal was on its way
            handle.cancel_goal_async()
            return
        self._request_result(entry)

    def _request_result(self, entry: _Pending) -> None:
        assert entry.handle is not None  # asked for only once the goal was accepted
        entry.handle.get_result_async().add_done_callback(lambda f: self._on_result(entry, f))

    def _on_feedback(self, entry: _Pending, feedback_msg) -> None:
        self._heard_s = time.monotonic()
        if feedback_msg.feedback.call_index == 0 and math.isnan(entry.started_s):
            self.port.hops.mark(entry.task_id, entry.index, "reported")
            t = entry.started_s = self._when(feedback_msg.feedback.stamp)
            self.port.segment_started(entry.task_id, entry.index, t)

    def _when(self, stamp) -> float:
        """The planner clock's time of a robot's stamp (ROS time), so that a report's delivery
        delay does not count as the robot waiting; the time of receipt if it has no stamp."""
        now = self.port.clock.now()
        if not (stamp.sec or stamp.nanosec):
            return now
        age = (self.get_clock().now() - Time.from_msg(stamp)).nanoseconds / 1e9
        return now - min(max(age, 0.0), now)

    def _on_result(self, entry: _Pending, future) -> None:
        self.port.hops.mark(entry.task_id, entry.index, "result")
        self._heard_s = time.monotonic()
        response = future.result()
        result = response.result
        ok = result.success and response.status == GoalStatus.STATUS_SUCCEEDED
        if response.status == GoalStatus.STATUS_UNKNOWN:  # the robot no longer knows the goal
            message = (
                f"its result was lost and the robot no longer has it (a robot keeps a result "
                f"{self.port.result_kept_s:g} s after the segment ends: fleet result_kept_s)"
            )
        else:
            message = result.message or ("" if ok else f"goal ended with status {response.status}")
        times = list(result.call_times_s)
        if math.isnan(entry.started_s) and times:
            # No start report arrived (the 1-robot benchmark lost a few feedback messages
            # under load): the robot started the calls their measured time ago.
            t = entry.started_s = self.port.clock.now() - sum(times)
            self.port.segment_started(entry.task_id, entry.index, t)
        self._finish(entry, ok, times, message)

    def _finish(self, entry: _Pending, ok: bool, times: list[float], message: str) -> None:
        t = self.port.clock.now()
        with self._lock:
            if self._pending.pop((entry.task_id, entry.index), None) is None:
                return  # already timed out or canceled
        self.port.segment_finished(entry.task_id, entry.index, ok, times, message, t)

    def check_timeouts(self) -> None:
        """In this node's executor (the planner node's timer queues it for busy links)."""
        now = self.port.clock.now()
        with self._lock:
            pending = list(self._pending.values())
        if not pending:
            self._gone_since = None
            return
        if self._server_present():
            self._gone_since = None
        elif self._gone_since is None:
            self._gone_since = now
        timeout_s = self.port.timeout_s
        for p in pending:
            overdue = not math.isnan(p.started_s) and now - p.started_s > p.worst_s + 1.0
            if p.handle is not None and (p.handle.status in _ENDED or overdue):
                # The goal ended (or should have) but its result has not arrived: a service
                # response or a goal status message can be lost under load or while DDS
                # discovery is still matching endpoints. Ask again soon, while the robot still
                # keeps the result, then once a second: more often would add to a backlog that
                # is holding the answers up (a result asked for twice is taken once).
                if math.isnan(p.asked_again_s):
                    p.asked_again_s = now
                elif now - p.asked_again_s >= (
                    1.0 if p.asked_again else min(REASK_FIRST_S, self.port.result_kept_s / 4)
                ):
                    p.asked_again_s = now
                    p.asked_again += 1
                    self._request_result(p)
            reason = None
            if p.handle is None and now - p.sent_s > timeout_s:
                reason = f"robot {self.robot_id} did not accept segment {p.index} within {timeout_s:.1f} s"
            elif not math.isnan(p.started_s) and now - p.started_s > p.worst_s + timeout_s:
                status = p.handle.status if p.handle is not None else "not accepted yet"
                reason = (
                    f"robot {self.robot_id} gave no result for segment {p.index} within "
                    f"{p.worst_s + timeout_s:.1f} s of starting it (goal status {status})"
                )
            elif self._gone_since is not None and now - self._gone_since > timeout_s:
                reason = f"robot {self.robot_id}'s action server disappeared"
            if reason:
                if p.handle is not None:
                    p.handle.cancel_goal_async()
                self._finish(p, False, [], reason)


class LiveRobotPort:
    """What every live robot port does in the planner's process: the core's RobotPort calls
    come in on the planner thread, robot reports go back into it via the driver's `post`, to
    the `listener` (the planner) the port was built for."""

    def __init__(
        self,
        fleet: FleetConfig,
        listener: RobotListener | None,
        driver_post,
        clock: WallClock,
        timeout_s: float,
        hops: HopLog | None = None,
    ) -> None:
        self.listener = listener
        self.post = driver_post
        self.clock = clock
        self.timeout_s = timeout_s
        self.result_kept_s = fleet.result_kept_s  # how long the robots keep an ended goal's result
        self.hops = hops or HopLog(None)
        self.robot_ids = {r.id for r in fleet.robots}

    def _listener(self) -> RobotListener:
        assert self.listener is not None  # only the links' child port has none, and it reports over its pipe
        return self.listener

    # reports, from any thread
    def segment_started(self, task_id: str, index: int, t: float) -> None:
        self.post(lambda: self._listener().segment_started(task_id, index, t))

    def segment_finished(self, task_id: str, index: int, ok: bool, times: list[float], message: str, t: float) -> None:
        self.post(lambda: self._listener().segment_finished(task_id, index, ok, times, message, t))

    # called in the planner thread
    def dispatch(self, robot_id: str, task_id: str, segment: DispatchedSegment) -> None:
        self.hops.mark(task_id, segment.index, "decided")
        if robot_id not in self.robot_ids:
            # posted, not called: the planner is in the middle of handling this task
            self.segment_finished(
                task_id, segment.index, False, [], f"robot {robot_id}: not in the fleet", self.clock.now()
            )
            return
        _, model = self._listener().robot_models(task_id)
        self.send(robot_id, task_id, segment, model.estimate_calls(segment.calls, "max"))

    def send(self, robot_id: str, task_id: str, segment: DispatchedSegment, worst_s: float) -> None:
        raise NotImplementedError

    # Implemented by each kind of port.
    def cancel(self, robot_id: str, task_id: str) -> None:
        raise NotImplementedError

    @property
    def link_nodes(self) -> list[Node]:
        """The link nodes to spin in the planner's process."""
        raise NotImplementedError

    def probe(self, robot_id: str, timeout_s: float) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class RosRobotPort(LiveRobotPort):
    """Planner → robots over ExecuteSegment (the core's RobotPort protocol): one RobotLink
    node per robot, in the planner's process (`link_nodes` spin beside the planner node)."""

    send_in_caller = False  # see RobotLink.dispatch

    def __init__(
        self,
        fleet: FleetConfig,
        listener: RobotListener | None,
        driver_post,
        clock: WallClock,
        timeout_s: float,
        hops: HopLog | None = None,
    ) -> None:
        super().__init__(fleet, listener, driver_post, clock, timeout_s, hops)
        self.links = {r.id: RobotLink(r.id, self) for r in fleet.robots}

    @property
    def link_nodes(self) -> list[Node]:
        return list(self.links.values())

    def send(self, robot_id: str, task_id: str, segment: DispatchedSegment, worst_s: float) -> None:
        self.links[robot_id].dispatch(task_id, segment, worst_s)

    def cancel(self, robot_id: str, task_id: str) -> None:
        link = self.links.get(robot_id)
        if link is not None:
            link.cancel(task_id)

    def probe(self, robot_id: str, timeout_s: float) -> bool:
        return self.links[robot_id].probe(timeout_s)

    def check_timeouts(self) -> None:
        for link in self.links.values():
            if link.busy:
                link.in_executor(link.check_timeouts)

    def close(self) -> None:
        """After the links' executors have stopped (ros/spin.py)."""
        for link in self.links.values():
            link.destroy_node()
