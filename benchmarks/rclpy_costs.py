"""What a few rclpy operations cost here, each holding the GIL (docs/performance/ros-path.md):
one turn of rclpy's SingleThreadedExecutor and of llm_planner's NodeExecutor (ros/rclpy_compat.py) for a node that
holds one action client (as a robot link does), woken by a guard condition;
`ActionClient.server_is_ready()` with 1 and 50 robots' action servers in the process; and
formatting a goal's UUID (a numpy array) as rclpy's action server does for its debug messages,
which it builds even with debug logging off, and the same UUID as the robot server's goals
have it (`_HexUuid` of ros/rclpy_compat.py).

Usage: . scripts/env.sh && python benchmarks/rclpy_costs.py [--json F]"""

from __future__ import annotations

import argparse
import time
import timeit
from functools import partial

import numpy as np
import rclpy
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from llm_planner.ros.rclpy_compat import NodeExecutor, _HexUuid
from llm_planner.ros.robot_client import RosRobotPort
from llm_planner.settings.fleet import RobotConfig
from llm_planner.testing.bench_result import write_bench_result
from llm_planner.testing.ros_fleet import start_fleet
from llm_planner_interfaces.action import ExecuteSegment

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


def format_goal_id(uuid) -> str:
    return f"Goal with ID {uuid}"


def server_is_ready_cost(robots: int) -> float:
    running = start_fleet([RobotConfig(id=f"r{i:02d}", type="tello", options={"time_scale": 0.001, "seed": i})
                           for i in range(robots)], robot_links="threads")  # with fifty robots in this process
    try:
        node = running.fleet.planner_node
        assert node is not None and isinstance(node.port, RosRobotPort)  # links in this process
        client = node.port.links["r00"].client
        started = time.thread_time()
        for _ in range(200):
            assert client.server_is_ready()
        return (time.thread_time() - started) / 200
    finally:
        running.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="result file (default out/bench/rclpy_costs.json)")
    args = parser.parse_args()
    rclpy.init()
    figures = {}
    for kind in (SingleThreadedExecutor, NodeExecutor):
        figures[f"{kind.__name__}_turn_us"] = cost = round(spin_once_cost(kind) * 1e6, 1)
        print(f"{kind.__name__} turn (spin_once, one action client, a guard condition): {cost:.0f} µs CPU")
    for robots in (1, 50):
        figures[f"server_is_ready_{robots}_robots_us"] = cost = round(server_is_ready_cost(robots) * 1e6, 1)
        print(f"server_is_ready() with {robots} robot(s) in the process: {cost:.0f} µs CPU")
    uuid = np.arange(16, dtype=np.uint8)
    for key, name, value in (("uuid_numpy_format_us", "a numpy array, as rclpy has it", uuid),
                             ("uuid_hex_format_us", "hex, as the robot server's goals have it", uuid.view(_HexUuid))):
        figures[key] = per = round(timeit.timeit(partial(format_goal_id, value), number=N) / N * 1e6, 2)
        print(f"formatting a goal's UUID for a debug message, {name}: {per:.1f} µs")
    ratios = {"executor_turn/rclpy_over_node_executor":
              round(figures["SingleThreadedExecutor_turn_us"] / figures["NodeExecutor_turn_us"], 2),
              "uuid_format/numpy_over_hex": round(figures["uuid_numpy_format_us"] / figures["uuid_hex_format_us"], 1)}
    write_bench_result(args.json, "rclpy_costs", figures, ratios, "CPU microseconds per operation")


if __name__ == "__main__":
    main()
