"""How long after its first segment was sent each task's robot started it, from recordings of
`lrtrace replay` (MCAP): the task's response time (in its final status) less the time from
QUEUED to its first segment sent (EXECUTING). Prints the tasks that waited `--least` seconds
or more, with their robot: a robot busy with an earlier plan, or one held for it.

Usage:

    . scripts/env.sh && python scripts/investigations/robot_start_delay.py \\
        out/contended-repeat3-timely-run1.mcap ..."""

from __future__ import annotations

import argparse

from llm_planner.domain.tasks import TaskState
from llm_planner.ros.replay import read_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="+")
    parser.add_argument("--least", type=float, default=0.2, help="list tasks whose robot started this late")
    args = parser.parse_args()
    for path in args.recordings:
        recorded = read_tasks(path)
        published, start = recorded.published, recorded.start
        queued, sent = recorded.reached(TaskState.QUEUED), recorded.reached(TaskState.EXECUTING)
        response = {msg.task_id: msg.response_time_s for _, msg in recorded.statuses
                    if msg.state == TaskState.SUCCEEDED}
        print(path)
        for task in sorted(set(sent) & set(response) & set(queued), key=published.__getitem__):
            to_send = sent[task] - queued[task]
            late = response[task] - to_send
            if late >= args.least:
                print(f"  {task} ({recorded.robot[task]}): published at {published[task] - start:.2f} s, sent after "
                      f"{to_send:.2f} s, started {late:.2f} s after that")


if __name__ == "__main__":
    main()
