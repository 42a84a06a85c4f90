"""`lrtrace replay`, `record` and `report`: workloads run live over ROS 2, and their recordings."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from llm_planner.commands import lrtrace_args
from llm_planner.commands.consoles import stdout
from llm_planner.commands.lrtrace_shared import (
    console,
    planner_config,
    progress_bar,
    vllm_engine,
    write_json,
)
from llm_planner.lrtrace import report
from llm_planner.lrtrace.compare import (
    executed_plan_stats,
    only_levels,
    paired_gaps,
    parse_levels,
    parse_policies,
    resolve_workload,
    run_order,
)
from llm_planner.lrtrace.load import load_traces
from llm_planner.lrtrace.metrics import by_label, by_level, recovery, task_differences, terminal_counts

if TYPE_CHECKING:
    from rich.progress import TaskID


def _pace(args, config, jobs: int, engine) -> tuple[float, float]:
    """(arrival speed-up, grace seconds) of a live replay on this machine's engine."""
    from llm_planner.engine.profile import load_engine_profile
    from llm_planner.lrtrace.pace import pace_for

    profile = engine.profile if engine is not None else load_engine_profile(config.engine_profile)
    reference = load_engine_profile(args.pace_engine) if args.pace_engine else None
    pace = pace_for(profile, reference, jobs, config)
    if reference is not None:
        console.print(
            f"pace: this machine's engine ({profile.name}) needs {pace.here_s:.0f} s for the workload's "
            f"{jobs} plans, {args.pace_engine} {pace.reference_s:.0f} s: "
            f"arrivals {pace.slowdown:.2f}x further apart"
        )
    return args.speed / pace.slowdown, args.grace if args.grace is not None else pace.grace_s()


def _record_path(args, name: str, policy: str, policies: list[str], repeat: int) -> Path:
    """Where one run is recorded: one file per policy and, with --repeat, per repeat."""
    run = f"-run{repeat + 1}" if args.repeat > 1 else ""
    if not args.record:
        return Path("out") / (f"{name}-live{run}.mcap" if len(policies) == 1 else f"{name}-{policy}-live{run}.mcap")
    if len(policies) == 1 and not run:
        return Path(args.record)
    stem = Path(args.record).stem + (f"-{policy}" if len(policies) > 1 else "")
    return Path(args.record).with_name(f"{stem}{run}.mcap")


def pooled_first_actions(runs: list[dict]) -> dict:
    """A policy's urgent first action under load against idle: one replay's, or over repeats
    the median of the runs' p50s, their ratio, and each run's."""
    if len(runs) == 1:
        return runs[0]
    idle = statistics.median(r["idle_p50_s"] for r in runs)
    load = statistics.median(r["load_p50_s"] for r in runs)
    return {"idle_p50_s": round(idle, 4), "load_p50_s": round(load, 4), "ratio": round(load / idle, 3), "runs": runs}


def _print_run(out, name: str, run, records: list, record_path: Path, engine) -> None:
    """One live run's lines: what it recorded, its urgent first action against the idle
    planner's, and how fast the engine ran against its profile."""
    out.print(
        f"{name}: recorded {run.messages} messages to {record_path}; tasks: {terminal_counts(records)}"
        + ("" if run.complete else " - NOT all tasks ended within the grace time")
    )
    if fa := run.first_actions:
        out.print(
            f"{name}: urgent first action (task published -> first segment sent) p50 "
            f"{fa['load_p50_s']:.3f} s under load, {fa['idle_p50_s']:.3f} s for the "
            f"same tasks on the idle planner: {fa['ratio']:.2f}x"
        )
    if engine is not None and engine.stats.step_corrections:
        out.print(
            f"{name}: step predictions corrected by {', '.join(c.describe() for c in engine.stats.step_corrections)}"
        )


def _pooled_results(
    runs: dict[str, list[list]], first_actions: dict[str, list[dict]], config, with_recovery: bool
) -> dict[str, dict]:
    """policy -> the metrics of all its runs' records (the keys of `compare --json`), with,
    over several runs, its gap to the reference policy run by run."""
    result = {}
    for policy, policy_runs in runs.items():
        records = [r for run_records in policy_runs for r in run_records]
        result[policy] = by_level(records, runs=policy_runs) | {"plans": executed_plan_stats(records, config)}
        if with_recovery:
            result[policy]["recovery"] = recovery(records)
        if first_actions[policy]:
            result[policy]["urgent_first_action"] = pooled_first_actions(first_actions[policy])
    if len(next(iter(runs.values()))) > 1:
        for policy, paired in paired_gaps(runs).items():
            result[policy]["paired"] = paired
    return result


def cmd_replay(args) -> int:
    from llm_planner.lrtrace.sim_check import live_vs_sim_table
    from llm_planner.lrtrace.simulate import simulate
    from llm_planner.ros.live_replay import replay_live
    from llm_planner.ros.replay import first_sent_after_arrival, records_from_recording

    if args.repeat < 1:
        raise ValueError("--repeat must be >= 1")
    config = planner_config(args)
    policies = parse_policies(args.policies or args.policy or config.policy)
    source = resolve_workload(args.workload, args.traces, config, args.duration)
    whole = source.workload(args.seed)
    levels = parse_levels(args.levels, config)
    workload = only_levels(whole, source.traces, config, levels) if levels else whole
    engine = None
    if config.engine == "vllm" and args.start_fleet:
        from llm_planner.domain.clock import WallClock

        engine = vllm_engine(config, args, WallClock())
    speed, grace_s = _pace(args, config, len(whole.jobs), engine)  # the whole workload's pace, levels or not
    console.print(f"grace for the last tasks: {grace_s:.0f} s")
    out = stdout()
    result, complete = {}, True
    runs: dict[str, list[list]] = {policy: [] for policy in policies}  # each repeat's records
    first_actions: dict[str, list[dict]] = {policy: [] for policy in policies}
    for repeat in range(args.repeat):
        for policy in run_order(policies, repeat):  # no policy always runs first
            of_runs = "" if args.repeat == 1 else f"run {repeat + 1}/{args.repeat}"
            name = f"{policy} ({of_runs})" if of_runs else policy
            run_config = config.model_copy(update={"policy": policy})
            if args.start_fleet:  # the planner publishes its live view: the recording holds its channels too
                run_config.live_view = run_config.live_view.model_copy(
                    update={"publish": True, **({"port": args.live_view} if args.live_view is not None else {})}
                )
            record_path = _record_path(args, source.name, policy, policies, repeat)
            with progress_bar(args.quiet) as progress:
                label = f"{source.name} live ({policy}, {of_runs})" if of_runs else f"{source.name} live ({policy})"
                bar = progress.add_task(label, total=len(workload.jobs), status="")

                def tick(done: int, sent: int, bar: TaskID = bar) -> None:
                    progress.update(bar, completed=done, status=f"{sent} published, {done} finished")

                run = replay_live(
                    run_config,
                    source.name,
                    workload,
                    source.traces,
                    record_path,
                    start_fleet=args.start_fleet,
                    seed=args.seed,
                    fail_rates=args.fail_rate,
                    speed=speed,
                    grace_s=grace_s,
                    idle_check=args.idle_check,
                    engine=engine,
                    say=console.print,
                    tick=tick,
                )
            complete &= run.complete
            records = records_from_recording(record_path, run_config, source.traces)
            runs[policy].append(records)
            if run.first_actions:
                first_actions[policy].append(run.first_actions)
            _print_run(out, name, run, records, record_path, engine)
            if args.compare_sim and repeat == 0:  # a real engine is reused on a virtual clock
                sim = simulate(
                    workload, source.traces, policy, run_config, args.seed, engine=engine, fail_rates=args.fail_rate
                )
                result[f"{policy} (sim)"] = by_level(sim.records)
                out.print(live_vs_sim_table(by_level(records), result[f"{policy} (sim)"], policy))
                differences = task_differences(records, sim.records, first_sent_after_arrival(record_path))
                out.print(report.differences_table(differences, f"largest live - simulated response ({policy})"))
    result |= _pooled_results(runs, first_actions, config, bool(args.fail_rate))
    if args.fail_rate:
        out.print(*report.recovery_lines(result))
    engine_name = f"vLLM {engine.model_dir}" if engine is not None else f"sim engine {config.engine_profile}"
    report.print_tables(
        {p: result[p] for p in policies},
        f"{source.name} live over ROS 2 ({engine_name})" + (f", {args.repeat} runs each" if args.repeat > 1 else ""),
        out,
    )
    for line in report.paired_lines(result, over="runs"):
        out.print(line)
    write_json(args.json, result, out)  # the keys of `compare --json`; with --compare-sim also "<policy> (sim)"
    return 0 if complete else 1


def cmd_record(args) -> int:
    from llm_planner.ros.live_replay import record

    stdout().print(
        f"recording the planner's tasks and statuses to {args.output}"
        + (f" for {args.duration:.0f} s" if args.duration else "; Ctrl-C to stop")
    )
    stdout().print(f"wrote {record(args.output, args.duration)} messages to {args.output}")
    return 0


def cmd_report(args) -> int:
    from llm_planner.ros.replay import default_traces, records_from_recording

    config = planner_config(args)
    records = records_from_recording(args.recording, config, load_traces(args.traces or default_traces()))
    if not records:
        raise ValueError(f"{args.recording}: no finished tasks recorded")
    results = {config.policy: by_level(records) | {"plans": executed_plan_stats(records, config)}}
    out = stdout()
    report.print_tables(results, f"{args.recording} ({config.policy})", out)
    out.print(f"tasks: {terminal_counts(records)}")
    write_json(args.json, results, out)
    if args.plots:
        folder = Path(args.plots)
        folder.mkdir(parents=True, exist_ok=True)
        report.plot_utility_by_task({config.policy: by_label(records)}, folder / "utility_by_task.png")
        out.print(f"plots: {folder / 'utility_by_task.png'}")
    return 0


def add_parsers(sub) -> None:
    """`lrtrace replay`, `record` and `report`."""
    p = sub.add_parser("replay", help="replay a workload live to a fleet over ROS 2, record it and report")
    lrtrace_args.replay_options(p)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("record", help="record /llm_planner/tasks and /llm_planner/status to MCAP")
    p.add_argument("output")
    p.add_argument("--duration", type=float, help="seconds (default: until Ctrl-C)")
    p.set_defaults(func=cmd_record)

    p = sub.add_parser("report", help="tables (and plots) from a recording")
    p.add_argument("recording")
    p.add_argument("--traces", help="trace set to name task types (default: the bundled one)")
    p.add_argument("--json")
    p.add_argument("--plots")
    p.set_defaults(func=cmd_report)
