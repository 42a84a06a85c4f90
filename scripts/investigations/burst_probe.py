"""Bursts of tasks at a small fast fleet, in one process: do they all end, and how?

300 tasks published one every `--gap` seconds to 8 simulated drones at 500x speed (the
planner on the sim engine); prints whether every task ended within 240 s, the terminal
states and the commonest failure messages.

With `--tracemalloc N`: after the 300, tracemalloc starts and N more tasks follow (the
whole process runs several times slower); prints the memory grown per task and where.
How docs/results/ros-path/findings/burst-tracemalloc-kept-1s.txt was made.

Usage: . scripts/env.sh && python scripts/investigations/burst_probe.py [--gap 0.01] [--tracemalloc 600]"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from collections import Counter

from llm_planner.settings.fleet import RobotConfig  # noqa: E402
from llm_planner.testing.ros_fleet import instruction, start_fleet

ROBOTS = 8
TRACES = [1, 3, 5, 7]  # short drone plans


def publish(client, first: int, count: int, gap_s: float) -> list[str]:
    ids = []
    for n in range(first, first + count):
        ids.append(f"t{n}")
        client.publish(ids[-1], f"d{n % ROBOTS}", instruction(TRACES[n % len(TRACES)]))
        time.sleep(gap_s)
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gap", type=float, default=0.01, help="seconds between two tasks")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="N", help="then N tasks under tracemalloc")
    args = parser.parse_args()
    robots = [RobotConfig(id=f"d{i}", type="tello", options={"time_scale": 0.002, "seed": i}) for i in range(ROBOTS)]
    running = start_fleet(robots, finished_tasks_kept=50)
    client = running.client
    try:
        started = time.monotonic()
        ids = publish(client, 0, 300, args.gap)
        ended = client.wait_terminal(ids, timeout=240)
        finals = [client.terminal(t) for t in ids]
        print(f"all ended: {ended} in {time.monotonic() - started:.1f} s;",
              Counter(f.state if f else None for f in finals),
              Counter((f.message or "")[:90] for f in finals if f and f.state != f.SUCCEEDED).most_common(3))
        if not args.tracemalloc:
            return 0 if ended else 1
        client.statuses.clear()  # this probe's own records are not the fleet's memory
        client.ended.clear()
        time.sleep(3)
        gc.collect()
        tracemalloc.start(12)
        before = tracemalloc.take_snapshot()
        ids = publish(client, 300, args.tracemalloc, args.gap)
        if not client.wait_terminal(ids, timeout=300):
            print(f"under tracemalloc: {sum(client.terminal(t) is None for t in ids)} of {len(ids)} tasks "
                  "had not ended after 300 s")
            return 1
        time.sleep(3)
        gc.collect()
        skip = [tracemalloc.Filter(False, tracemalloc.__file__)]
        stats = tracemalloc.take_snapshot().filter_traces(skip).compare_to(before.filter_traces(skip), "traceback")
        total = sum(s.size_diff for s in stats)
        print(f"under tracemalloc: {len(ids)} tasks, {total / 1024:.0f} KiB net, {total / len(ids):.0f} B per task")
        for s in stats[:12]:
            print(f"{s.size_diff / 1024:8.1f} KiB {s.count_diff:6d} blocks")
            for line in s.traceback.format()[-8:]:
                print("      ", line)
        return 0
    finally:
        running.stop()


if __name__ == "__main__":
    sys.exit(main())
