"""Where the planner thread's time goes: benchmarks/ros_overhead.py with each planner node's
thread (LiveDriver) under cProfile, then its functions by own time, one table per scenario's
planner (printed as the process exits). Waiting for the engine shows as lock `acquire`.

Arguments go to ros_overhead.py, e.g.

    . scripts/env.sh && python scripts/investigations/profile_planner_thread.py --layouts "one process" --robots 50"""

from __future__ import annotations

import atexit
import cProfile
import io
import pstats
import runpy
import sys
from pathlib import Path

from llm_planner.planning.driver import LiveDriver

TOP = 22
_run = LiveDriver._run


def _profiled_run(self) -> None:
    profile = cProfile.Profile()

    def report() -> None:
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(TOP)
        print(f"\nplanner thread, by own time:{out.getvalue()}", flush=True)

    atexit.register(report)
    profile.enable()  # this thread only
    _run(self)


def main() -> None:
    LiveDriver._run = _profiled_run
    sys.argv = ["ros_overhead.py", *sys.argv[1:]]
    runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "ros_overhead.py"), run_name="__main__")


if __name__ == "__main__":
    main()
