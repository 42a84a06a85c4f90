"""What the engine did while each urgent task waited for its first segment, in a live replay.

`run LOG <lrtrace arguments>` runs lrtrace (e.g. `replay ... --record out/X.mcap`) with every
vLLM iteration, suspension and resume written to LOG (JSON lines: policy, wall time, duration,
running generations, prefilled tokens, requests started). `show LOG RECORDING...` prints, per
urgent task of each recording (`lrtrace replay --record`, one file per policy), the time from
its arrival at the planner to its first segment sent, and each iteration in between as
`start:duration/batch[/pf prefilled tokens][/n requests started]`, with the suspensions and
resumes of the policy. E.g.

    . scripts/env.sh && python scripts/investigations/urgent_timeline.py run out/steps.jsonl replay \\
        config/jobs/contended_fleet.yaml --traces config/traces/timely_tasks.yaml --start-fleet --engine vllm \\
        --policies timely,vllm-stream --record out/steps.mcap \\
        --pace-engine smollm2-135m-instruct-bfloat16-cpu-avx512-bf16
    python scripts/investigations/urgent_timeline.py show out/steps.jsonl out/steps-timely.mcap \\
        out/steps-vllm-stream.mcap"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path


def run(log_path: str, argv: list[str]) -> int:
    import llm_planner.lrtrace.compare as compare
    import llm_planner.ros.live_replay as live_replay
    from llm_planner.commands.lrtrace import main
    from llm_planner.engine.vllm_engine import VllmEngine

    log = open(log_path, "w")
    current = {"policy": None}
    step, start = VllmEngine.step, VllmEngine._start

    def write(**fields) -> None:
        log.write(json.dumps({"policy": current["policy"], **fields}) + "\n")

    def counted_start(self, gen, urgency):
        self.started_since_step = getattr(self, "started_since_step", 0) + 1
        return start(self, gen, urgency)

    def logged_step(self):
        started, self.started_since_step = getattr(self, "started_since_step", 0), 0
        wall, batch = time.time(), len(self.running)
        result = step(self)
        write(at=wall, duration=time.time() - wall, batch=batch, prefill=result.prefill_tokens, started=started)
        return result

    def logged(name):
        method = getattr(VllmEngine, name)

        def wrapper(self, gen_id, *args, **kwargs):
            write(at=time.time(), event=name, gen=gen_id)
            return method(self, gen_id, *args, **kwargs)
        return wrapper

    def labelled(fn, policy_of):
        def wrapper(*args, **kwargs):
            current["policy"] = policy_of(*args)
            return fn(*args, **kwargs)
        return wrapper

    VllmEngine._start, VllmEngine.step = counted_start, logged_step
    VllmEngine.suspend, VllmEngine.resume = logged("suspend"), logged("resume")
    live_replay.replay_live = labelled(live_replay.replay_live, lambda config, *rest: config.policy)
    compare.simulate = labelled(compare.simulate, lambda workload, traces, policy, *rest: policy)
    try:
        return main(argv)
    finally:
        log.close()


def show(log_path: str, recordings: list[str]) -> None:
    from llm_planner.domain.tasks import TaskState
    from llm_planner.ros.replay import read_tasks

    rows = [json.loads(line) for line in open(log_path)]
    for recording in recordings:
        recorded = read_tasks(recording)
        queued, sent = recorded.reached(TaskState.QUEUED), recorded.reached(TaskState.EXECUTING)
        policies = sorted({r["policy"] for r in rows if r["policy"]})
        # a recording of several policies' replay ends in -<policy> (then -run<N> with --repeat);
        # a one-policy log needs no name
        stem = re.sub(r"-run\d+$", "", Path(recording).stem)
        policy = next((p for p in policies if stem.endswith(f"-{p}")), policies[0] if len(policies) == 1 else None)
        if policy is None:
            sys.exit(f"{recording}: its name ends in none of the logged policies ({', '.join(policies)})")
        mine = [r for r in rows if r["policy"] == policy]
        print(f"== {recording} ({policy})")
        for task_id in sorted(recorded.urgent, key=lambda i: queued.get(i, 0.0)):
            if task_id not in sent:
                print(f"{task_id}: no segment sent")
                continue
            arrived, first = queued[task_id], sent[task_id]
            window = [r for r in mine if arrived - 0.01 < r["at"] + r.get("duration", 0.0) and r["at"] < first]
            print(f"{task_id}: first segment {first - arrived:.3f} s after arrival; " + " ".join(
                f"{r['at'] - arrived:+.2f}:{r['event']} {r['gen']}" if "event" in r else
                f"{r['at'] - arrived:+.2f}:{r['duration'] * 1000:.0f}ms/b{r['batch']}"
                + (f"/pf{r['prefill']}" if r["prefill"] else "") + (f"/n{r['started']}" if r["started"] else "")
                for r in window))


def main() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "run":
        return run(sys.argv[2], sys.argv[3:])
    if len(sys.argv) >= 4 and sys.argv[1] == "show":
        show(sys.argv[2], sys.argv[3:])
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
