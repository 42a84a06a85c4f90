"""Where two runs of `lrtrace compare` differ, task by task: for each seed, which of the two ran
first (on the real engine each seed's runs start one variant further on); for each task, each
run's utility of its maximum, when its first segment went to the robot (seconds after the
task's arrival), how many units that first dispatch carried (more than one: the plan's first
unit was held for the next) and whether the two executed the same plan; then, per seed and
level, the sum of the utility differences. The arguments after the two run labels are
`lrtrace`'s. E.g.

    . scripts/env.sh && python scripts/investigations/task_by_task.py timely "timely -hold" \\
        --config out/base-model.yaml compare config/jobs/urgent_under_load.yaml \\
        --traces config/traces/timely_tasks.yaml --engine vllm --policies timely --ablation hold \\
        --seeds 4 --no-plots --quiet"""

from __future__ import annotations

import sys
from collections import defaultdict

from llm_planner.lrtrace.compare import run_order
from llm_planner.lrtrace.metrics import first_sent_s


def first_dispatch_units(record) -> int:
    return len(record.segments[0].unit_calls) if record.segments else 0


def show(runs: dict, first: str, second: str) -> None:
    for seed, (a_run, b_run) in enumerate(zip(runs[first], runs[second])):
        b_by_id = {r.request.task_id: r for r in b_run.records}
        ran_first = next(label for label in run_order(list(runs), seed) if label in (first, second))
        print(f"seed {seed} ({ran_first} ran first): task, level, utility / max, first segment sent s and "
              f"units in it: {first} | {second}")
        gained: defaultdict[str, float] = defaultdict(float)
        for a in sorted(a_run.records, key=lambda r: r.request.arrival_s):
            b = b_by_id[a.request.task_id]
            gained[a.request.urgency_name] += a.utility - b.utility
            same = "same plan" if a.plan == b.plan else "plans differ"
            print(f"  {a.request.task_id:8s} {a.request.urgency_name:7s} {a.utility:6.2f} / {a.max_utility:4.1f} "
                  f"{first_sent_s(a):6.2f} {first_dispatch_units(a)} | {b.utility:6.2f} / {b.max_utility:4.1f} "
                  f"{first_sent_s(b):6.2f} {first_dispatch_units(b)}  {same}")
        print(f"  {first} minus {second}, utility: "
              + ", ".join(f"{level} {gain:+.2f}" for level, gain in gained.items()))


def main(argv: list[str]) -> int:
    import llm_planner.commands.lrtrace as cli

    first, second, lrtrace_argv = argv[0], argv[1], argv[2:]
    captured = {}
    compare = cli.compare

    def capturing(*args, **kwargs):
        captured["comparison"] = compare(*args, **kwargs)
        return captured["comparison"]

    cli.compare = capturing
    rc = cli.main(lrtrace_argv)
    if rc == 0:
        show(captured["comparison"].runs, first, second)
    return rc


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
