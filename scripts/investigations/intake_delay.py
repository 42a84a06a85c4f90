"""How long a live planner takes to queue a task it was sent, and to send its first segment.

Reads recordings of `lrtrace replay` (MCAP) and prints, per recording, the time from a task's
publication to its QUEUED status (the planner stamps a task's arrival when the message comes
in, but queues it between two engine iterations, so this is about what is left of the
iteration in flight), p50 and largest, for all tasks and for the urgent ones; the tasks that
waited `--held` seconds or more from QUEUED to GENERATING (held back by admission), each with
its publication time (seconds after the recording's first task); and each urgent task's
publication time, publication -> QUEUED and publication -> first segment sent (EXECUTING).

Usage: . scripts/env.sh && python scripts/investigations/intake_delay.py out/contended-timely.mcap ..."""

from __future__ import annotations

import argparse
import statistics

from llm_planner.domain.tasks import TaskState
from llm_planner.ros.replay import read_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="+")
    parser.add_argument("--held", type=float, default=0.2, help="list tasks admitted this long after QUEUED")
    args = parser.parse_args()
    for path in args.recordings:
        recorded = read_tasks(path)
        published, urgent, start = recorded.published, recorded.urgent, recorded.start
        queued, sent = recorded.reached(TaskState.QUEUED), recorded.reached(TaskState.EXECUTING)
        admitted = recorded.reached(TaskState.GENERATING)
        delay = {task: queued[task] - published[task] for task in queued if task in published}
        print(path)
        for name, ids in (("all", list(delay)), ("urgent", [t for t in delay if t in urgent])):
            if ids:
                values = [delay[t] for t in ids]
                print(f"  published -> queued, {name} ({len(ids)}): p50 {statistics.median(values) * 1000:.0f} ms, "
                      f"largest {max(values) * 1000:.0f} ms")
        held = [t for t in delay if t in admitted and admitted[t] - queued[t] >= args.held]
        for task in sorted(held, key=published.__getitem__):
            print(f"    {task}: published at {published[task] - start:.2f} s, "
                  f"queued after {delay[task] * 1000:.0f} ms, "
                  f"admitted {(admitted[task] - queued[task]) * 1000:.0f} ms later, at {admitted[task] - start:.2f} s")
        for task in sorted(urgent & set(delay), key=published.__getitem__):
            first = f"{(sent[task] - published[task]) * 1000:.0f} ms" if task in sent else "never"
            print(f"    {task} (urgent): published at {published[task] - start:.2f} s, queued after "
                  f"{delay[task] * 1000:.0f} ms, first segment sent after {first}")


if __name__ == "__main__":
    main()
