"""Where the CPU goes on the ROS path: benchmarks/ros_overhead.py (or, with `--script`,
another benchmark of this folder) under yappi (every thread, CPU clock), then the functions
with the most own and total time. With `--thread NAME`, only the threads of that name, e.g.
the planner's own (`llm_planner-core`, planning/driver.py); waiting for the engine shows as
lock `acquire`.

yappi is not part of the set-up (`pip install yappi` first). Other arguments go to the
benchmark, e.g.

    . scripts/env.sh && python scripts/investigations/profile_ros.py --tasks 60 --layouts "one process" \\
        --robots 50 --no-load
    . scripts/env.sh && python scripts/investigations/profile_ros.py --script rclpy_floor.py --goals 300
    . scripts/env.sh && python scripts/investigations/profile_ros.py --thread llm_planner-core \\
        --layouts "one process" --robots 50"""

from __future__ import annotations

import runpy
import sys
import threading
from pathlib import Path

try:
    import yappi
except ImportError:
    sys.exit("profile_ros.py needs yappi: pip install yappi")

TOP = 30


def main() -> None:
    args = sys.argv[1:]
    script, thread = "ros_overhead.py", None
    while args[:1] in (["--script"], ["--thread"]):
        if args[0] == "--script":
            script = args[1]
        else:
            thread = args[1]
        args = args[2:]
    sys.argv = [script, *args]
    yappi.set_context_name_callback(lambda: threading.current_thread().name)
    yappi.set_clock_type("cpu")
    yappi.start()
    try:
        runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / script), run_name="__main__")
    finally:
        yappi.stop()
    threads = [t for t in yappi.get_thread_stats() if thread is None or t.name == thread]
    if not threads:
        sys.exit(f"no thread named {thread!r} ran")
    print(f"\nCPU seconds over {'all threads' if thread is None else f'the {len(threads)} {thread} thread(s)'}: "
          f"{sum(t.ttot for t in threads):.2f}")
    for t in [None] if thread is None else threads:
        stats = yappi.get_func_stats() if t is None else yappi.get_func_stats(ctx_id=t.id)
        for key, title in (("tsub", "own time"), ("ttot", "total time")):
            stats.sort(key)
            print(f"\nby {title}{'' if t is None else f' ({t.name} {t.id})'}:\n"
                  f"{'own s':>8} {'total s':>8} {'calls':>9}  function")
            for s in stats[:TOP]:
                where = f"{s.module.split('site-packages/')[-1]}:{s.lineno}"
                print(f"{s.tsub:8.2f} {s.ttot:8.2f} {s.ncall:9d}  {where} {s.name}")


if __name__ == "__main__":
    main()
