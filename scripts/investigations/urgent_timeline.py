"""What the engine did while each urgent task waited for its first segment, in a live replay.

Reads recordings that hold the live view's channels (`lrtrace replay --start-fleet --record`;
one file per policy) and prints, per urgent task, the time from its arrival at the planner
to its first segment sent, the decisions that kept it waiting, and each engine iteration in
between as `start:duration/batch[/pf prefilled tokens][/n generations joined]`. E.g.

    . scripts/env.sh && lrtrace replay config/jobs/contended_fleet.yaml --traces config/traces/timely_tasks.yaml \\
        --start-fleet --engine vllm --policies timely,vllm-stream --record out/steps.mcap \\
        --pace-engine smollm2-135m-instruct-bfloat16-cpu-avx512-bf16
    python scripts/investigations/urgent_timeline.py out/steps-timely.mcap out/steps-vllm-stream.mcap"""

from __future__ import annotations

import json
import sys


def main() -> int:
    from mcap.reader import make_reader

    from llm_planner.domain.tasks import TaskState
    from llm_planner.ros.replay import read_tasks
    from llm_planner.view.channels import BATCH, DECISIONS

    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for recording in sys.argv[1:]:
        recorded = read_tasks(recording)
        queued, sent = recorded.reached(TaskState.QUEUED), recorded.reached(TaskState.EXECUTING)
        iterations, waits = [], []  # (log time s, message), the recorder's clock as the tasks'
        with open(recording, "rb") as f:
            for _, channel, message in make_reader(f).iter_messages(topics=[BATCH, DECISIONS]):
                data = json.loads(message.data)
                if channel.topic == BATCH:
                    iterations.append((message.log_time / 1e9, data))
                elif data["kind"] in ("deferred", "suspended"):
                    waits.append((message.log_time / 1e9, data))
        if not iterations:
            sys.exit(f"{recording} holds no live view channels (record with lrtrace replay --start-fleet)")
        print(f"== {recording}")
        for task_id in sorted(recorded.urgent, key=lambda i: queued.get(i, 0.0)):
            if task_id not in sent:
                print(f"{task_id}: no segment sent")
                continue
            arrived, first = queued[task_id], sent[task_id]
            window = [(t, i) for t, i in iterations if arrived - 0.01 < t and t - i["step_s"] < first]
            own = [(t, d) for t, d in waits if d["task_id"] == task_id and arrived - 0.01 < t < first]
            print(f"{task_id}: first segment {first - arrived:.3f} s after arrival; "
                  + "".join(f"{t - arrived:+.2f}:{d['kind']} ({d['reason']}); " for t, d in own)
                  + " ".join(f"{t - i['step_s'] - arrived:+.2f}:{i['step_s'] * 1000:.0f}ms/b{i['size']}"
                             + (f"/pf{i['prefill_tokens']}" if i["prefill_tokens"] else "")
                             + (f"/n{i['started']}" if i["started"] else "") for t, i in window))
    return 0


if __name__ == "__main__":
    sys.exit(main())
