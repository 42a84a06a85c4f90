"""The ROS path's own overhead: task published -> first ExecuteSegment goal received at the
robot, minus the engine's own time for that segment (the planner's arrival -> dispatch),
p50/p99, with 1 robot and with 50 robots, in one run. Real rclpy + Fast DDS on loopback,
sim engine, simulated robots.

Usage: . scripts/env.sh && python benchmarks/ros_overhead.py [--tasks 200]"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))

from ros_fixtures import instruction, start_fleet  # noqa: E402

from llm_planner.settings.fleet import RobotConfig  # noqa: E402


def measure(n_robots: int, n_tasks: int) -> np.ndarray:
    robots = [RobotConfig(id=f"r{i:02d}", type="tello", options={"time_scale": 0.001, "seed": i})
              for i in range(n_robots)]
    running = start_fleet(robots)
    try:
        planner = running.fleet.planner_node.planner
        c = running.client
        ids = []
        for k in range(n_tasks):
            task_id = f"ovh{n_robots}-{k}"
            ids.append(task_id)
            c.publish(task_id, f"r{k % n_robots:02d}", instruction(7))  # urgent-style short plan
            time.sleep(0.05)  # one task at a time through the engine: no queueing in the numbers
        assert c.wait_terminal(ids, timeout=120)
        received = {}
        for server in running.fleet.robots:
            received.update(server.received)
        records = running.fleet.planner_node.driver.call(lambda: {t: planner.records[t] for t in ids})
        overhead = []
        for task_id in ids:
            rec = records[task_id]
            engine = rec.segments[0].dispatched_s - rec.request.arrival_s
            total = received[(task_id, 0)] - c.published[task_id]
            overhead.append(total - engine)
        return np.array(overhead) * 1000
    finally:
        running.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    args = parser.parse_args()
    print(f"{'robots':>6} {'tasks':>6} {'overhead p50 ms':>16} {'p99 ms':>8} {'max ms':>8}")
    for n in (1, 50):
        ms = measure(n, args.tasks)
        print(f"{n:>6} {len(ms):>6} {np.percentile(ms, 50):>16.2f} {np.percentile(ms, 99):>8.2f} {ms.max():>8.2f}",
              flush=True)


if __name__ == "__main__":
    main()
