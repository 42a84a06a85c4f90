"""Where the CPU goes on the ROS path: benchmarks/ros_overhead.py (or, with `--script`,
another benchmark of this folder) under yappi (every thread, CPU clock), then the functions
with the most own and total time.

yappi is not part of the set-up (`pip install yappi` first). Other arguments go to the
benchmark, e.g.

    . scripts/env.sh && python scripts/investigations/profile_ros.py --tasks 60 --layouts "one process" \\
        --robots 50 --no-load
    . scripts/env.sh && python scripts/investigations/profile_ros.py --script rclpy_floor.py --goals 300"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

try:
    import yappi
except ImportError:
    sys.exit("profile_ros.py needs yappi: pip install yappi")

TOP = 30


def main() -> None:
    args = sys.argv[1:]
    script = "ros_overhead.py"
    if args[:1] == ["--script"]:
        script, args = args[1], args[2:]
    sys.argv = [script, *args]
    yappi.set_clock_type("cpu")
    yappi.start()
    try:
        runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / script), run_name="__main__")
    finally:
        yappi.stop()
    stats = yappi.get_func_stats()
    total = sum(t.ttot for t in yappi.get_thread_stats())
    print(f"\nCPU seconds over all threads: {total:.2f}")
    for key, title in (("tsub", "own time"), ("ttot", "total time")):
        stats.sort(key)
        print(f"\nby {title}:\n{'own s':>8} {'total s':>8} {'calls':>9}  function")
        for s in stats[:TOP]:
            where = f"{s.module.split('site-packages/')[-1]}:{s.lineno}"
            print(f"{s.tsub:8.2f} {s.ttot:8.2f} {s.ncall:9d}  {where} {s.name}")


if __name__ == "__main__":
    main()
