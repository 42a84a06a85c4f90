"""What a few rclpy operations cost here, each holding the GIL (docs/performance.md):
one turn of rclpy's SingleThreadedExecutor and of llm_planner's NodeExecutor (ros/rclpy_compat.py) for a node that
holds one action client (as a robot link does), woken by a guard condition;
`ActionClient.server_is_ready()` with 1 and 50 robots' action servers in the process; and
formatting a goal's UUID (a numpy array) as rclpy's action server does for its debug messages,
which it builds even with debug logging off, and the same UUID as the robot server's goals
have it (ros/robot_server.py `_HexUuid`).

Usage: . scripts/env.sh && python benchmarks/rclpy_costs.py"""

from __future__ import annotations

import sys
import time
import timeit
from pathlib import Path

import numpy as np
import rclpy
from llm_planner_interfaces.action import ExecuteSegment
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))
from ros_fixtures import start_fleet  # noqa: E402

from llm_planner.ros.rclpy_compat import NodeExecutor  # noqa: E402
from llm_planner.ros.robot_server import _HexUuid  # noqa: E402
from llm_planner.settings.fleet import RobotConfig  # noqa: E402

N = 3000


def spin_once_cost(executor_kind) -> float:
    node = Node("rclpy_costs_link", start_parameter_services=False, enable_rosout=False)
    ActionClient(node, ExecuteSegment, "/nobody/execute_segment")
    guard = node.create_guard_condition(lambda: None)
    if executor_kind is SingleThreadedExecutor:
        executor = SingleThreadedExecutor()
        executor.add_node(node)
    else:
        executor = executor_kind(node)
    started = time.thread_time()
    for _ in range(N):
        guard.trigger()
        executor.spin_once(timeout_sec=1.0)
    executor.shutdown()
    node.destroy_node()
    return (time.thread_time() - started) / N


def server_is_ready_cost(robots: int) -> float:
    running = start_fleet([RobotConfig(id=f"r{i:02d}", type="tello", options={"time_scale": 0.001, "seed": i})
                           for i in range(robots)], robot_links="threads")  # with fifty robots in this process
    try:
        client = running.fleet.planner_node.port.links["r00"].client
        started = time.thread_time()
        for _ in range(200):
            assert client.server_is_ready()
        return (time.thread_time() - started) / 200
    finally:
        running.stop()


def main() -> None:
    rclpy.init()
    for kind in (SingleThreadedExecutor, NodeExecutor):
        print(f"{kind.__name__} turn (spin_once, one action client, a guard condition): "
              f"{spin_once_cost(kind) * 1e6:.0f} µs CPU")
    for robots in (1, 50):
        cost = server_is_ready_cost(robots)
        print(f"server_is_ready() with {robots} robot(s) in the process: {cost * 1e6:.0f} µs CPU")
    uuid = np.arange(16, dtype=np.uint8)
    for name, value in (("a numpy array, as rclpy has it", uuid),
                        ("hex, as the robot server's goals have it", uuid.view(_HexUuid))):
        per = timeit.timeit(lambda: "Goal with ID {0}".format(value), number=N) / N
        print(f"formatting a goal's UUID for a debug message, {name}: {per * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
