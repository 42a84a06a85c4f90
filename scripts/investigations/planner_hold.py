"""How long the planner thread goes on after deciding to send a goal, before it next waits
(for the engine, or idle for new work) and so gives up the GIL: benchmarks/ros_overhead.py
with the planner's robot port, the engine's steps and the planner's idle turns timed, then,
for each goal the planner decided on, the time from that decision to the planner's next wait.
A link's thread cannot send the goal before then (docs/performance/ros-path.md). Printed per scenario,
before ros_overhead's own table of it. The one-process layout only: in the other the planner
is a process of its own.

Other arguments go to ros_overhead.py, e.g.

    . scripts/env.sh && python scripts/investigations/planner_hold.py --robots 50"""

from __future__ import annotations

import bisect
import math
import runpy
import sys
import time
from pathlib import Path

import numpy as np

from llm_planner.engine.watchdog import WatchedEngine
from llm_planner.planning.planner import Planner
from llm_planner.ros.robot_client import LiveRobotPort

decided: list[float] = []
waits: list[float] = []  # when the planner thread began to wait: an engine step, or idle


def timed(cls, name: str, stamps: list[float]) -> None:
    original = getattr(cls, name)

    def wrapper(self, *args, **kwargs):
        stamps.append(time.monotonic())
        return original(self, *args, **kwargs)

    setattr(cls, name, wrapper)


def idle_turns_timed() -> None:
    step = Planner.step

    def wrapper(self: Planner, until_s: float = math.inf) -> bool:
        busy = step(self, until_s)
        if not busy:  # the planner's loop now waits for new work
            waits.append(time.monotonic())
        return busy

    Planner.step = wrapper  # type: ignore[method-assign]  # timing the loop is the point


def report(scenario: str, first: int, last: int) -> None:
    stamps = np.array(sorted(waits))
    holds = []
    for t in decided[first:last]:
        i = bisect.bisect_right(stamps, t)
        if i < len(stamps):
            holds.append((stamps[i] - t) * 1000)
    if holds:
        ms = np.array(holds)
        print(f"{scenario}: decision -> the planner's next wait, {len(ms)} goals: p50 "
              f"{np.percentile(ms, 50):.2f} / p90 {np.percentile(ms, 90):.2f} / p99 {np.percentile(ms, 99):.2f} ms",
              flush=True)


def main() -> None:
    timed(LiveRobotPort, "dispatch", decided)  # every robot port's
    timed(WatchedEngine, "step", waits)
    idle_turns_timed()
    if "--layouts" in sys.argv:
        sys.exit("planner_hold.py measures the one-process layout only")
    # its functions, not its main
    ros_overhead = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "ros_overhead.py"))
    run_in_process = ros_overhead["run_in_process"]

    def measured(scenario, *args, **kwargs):
        first = len(decided)
        try:
            return run_in_process(scenario, *args, **kwargs)
        finally:
            report(scenario.name, first, len(decided))

    ros_overhead["main"].__globals__["run_in_process"] = measured  # the namespace main runs in
    sys.argv = ["ros_overhead.py", "--layouts", "one process", *sys.argv[1:]]
    ros_overhead["main"]()


if __name__ == "__main__":
    main()
