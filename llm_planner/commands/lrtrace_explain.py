"""`lrtrace explain`: a task's scheduling decisions with their reasons, or the late tasks and
the decision that cost each most, from a decision trace (`compare`/`simulate --decisions`) or
a recording that holds the live view's channels (`replay --record`, `--view-mcap`)."""

from __future__ import annotations

from pathlib import Path

from llm_planner.commands.consoles import stdout
from llm_planner.domain.decisions import read_decisions
from llm_planner.lrtrace.explain import describe, describe_late, late_tasks, timeline
from llm_planner.view.channels import read_view_recording


def add_parser(sub) -> None:
    p = sub.add_parser("explain", help="why a task waited: its decisions with their reasons, from a decision trace")
    p.add_argument("decisions", help="the file `compare`/`simulate --decisions FILE` wrote, or an MCAP recording")
    p.add_argument("--run", help="which run of the file (default: the first; the runs are listed)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--task", help="the task whose timeline to print")
    what.add_argument(
        "--late", action="store_true", help="the tasks that lost utility, with the decision that cost each most"
    )
    p.add_argument("--top", type=int, default=20, help="with --late: how many tasks (default 20)")
    p.set_defaults(func=cmd_explain)


def cmd_explain(args) -> int:
    path = Path(args.decisions)
    runs = {path.stem: read_view_recording(path)} if path.suffix == ".mcap" else read_decisions(path)
    if not any(run.decisions for run in runs.values()):
        raise ValueError(f"{args.decisions} holds no decisions")
    run = args.run or next(iter(runs))
    if run not in runs:
        raise ValueError(f"no run {run!r} in {args.decisions}; it holds: {', '.join(runs)}")
    decisions = runs[run].decisions
    iterations = runs[run].iterations
    out = stdout()
    out.print(f"run {run} ({len(decisions)} decisions; runs in the file: {', '.join(runs)})", highlight=False)
    if args.late:
        late = late_tasks(decisions, iterations)
        out.print(f"{len(late)} task(s) lost utility", highlight=False)
        for task in late[: args.top]:
            out.print(describe_late(task), highlight=False)
        return 0
    steps = timeline(decisions, args.task)
    if not steps:
        raise ValueError(f"no decisions for task {args.task!r} in run {run!r}")
    for step in steps:
        out.print(describe(step), highlight=False, soft_wrap=True)
    return 0
