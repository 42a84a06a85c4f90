"""A small client node: publishes Tasks and collects every TaskStatus (used by `lrtrace
replay`, the benchmarks and the tests)."""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, defaultdict

from rclpy.node import Node

from llm_planner.domain.names import STATUS_TOPIC, TASKS_TOPIC
from llm_planner.planning.intake import TaskFields
from llm_planner.ros.hops import HopLog
from llm_planner.ros.messages import task_message
from llm_planner.ros.qos import TOPIC
from llm_planner_interfaces.msg import Task, TaskStatus

TERMINAL = (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.REJECTED, TaskStatus.CANCELED)


class TaskClient(Node):
    def __init__(self, name: str = "llm_planner_client") -> None:
        super().__init__(name)
        self._lock = threading.Condition()
        self.statuses: dict[str, list[tuple[float, TaskStatus]]] = defaultdict(list)
        self.ended: dict[str, TaskStatus] = {}  # each task's first terminal status
        self.terminal_counts: Counter[str] = Counter()  # terminal statuses per task: more than 1 is a bug
        self.published: dict[str, float] = {}
        self.hops = HopLog.from_env(name)
        self._pub = self.create_publisher(Task, TASKS_TOPIC, TOPIC)
        self._sub = self.create_subscription(TaskStatus, STATUS_TOPIC, self._on_status, TOPIC)

    def _on_status(self, msg: TaskStatus) -> None:
        with self._lock:
            self.statuses[msg.task_id].append((time.monotonic(), msg))
            if msg.state in TERMINAL:
                self.ended.setdefault(msg.task_id, msg)
                self.terminal_counts[msg.task_id] += 1
            self._lock.notify_all()

    def wait_for_planner(self, timeout: float = 10.0) -> bool:
        return self.wait_for_subscribers(1, timeout)

    def wait_for_subscribers(self, count: int, timeout: float) -> bool:
        """Until `count` subscriptions (the planner's, a recorder's) have matched the tasks topic."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._pub.get_subscription_count() >= count:
                return True
            time.sleep(0.05)
        return False

    def publish(
        self,
        task_id: str,
        robot_id: str,
        instruction: str,
        urgency: int = 0,
        beta: float = 0.0,
        ert_s: float = 0.0,
        cutoff_s: float = 0.0,
    ) -> None:
        self.send(TaskFields(task_id, robot_id, instruction, urgency, beta, ert_s, cutoff_s))

    def send(self, task: TaskFields) -> None:
        self.published[task.task_id] = time.monotonic()
        self.hops.mark(task.task_id, 0, "published", self.published[task.task_id])
        self._pub.publish(task_message(task))

    def terminal(self, task_id: str) -> TaskStatus | None:
        return self.ended.get(task_id)

    def count_ended(self, task_ids: set[str]) -> int:
        with self._lock:
            return len(task_ids & self.ended.keys())

    def wait_terminal(self, task_ids, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._lock:
            while not all(self.terminal(t) is not None for t in task_ids):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.2))
        return True

    def destroy_node(self) -> None:
        self.hops.write()
        super().destroy_node()

    def first(self, task_id: str, state: int) -> tuple[float, TaskStatus] | None:
        return next(((t, m) for t, m in self.statuses.get(task_id, []) if m.state == state), None)

    def segments_executing(self, task_id: str) -> list[int]:
        return [m.segment_index for _, m in self.statuses.get(task_id, []) if m.state == TaskStatus.EXECUTING]


def is_nan(x: float) -> bool:
    return isinstance(x, float) and math.isnan(x)
